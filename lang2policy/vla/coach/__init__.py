"""Corrected episodes, Yell At Your Robot style (issue 18): a scripted person who corrects the
running VLA in words (``corrector`` for lifts, ``push_corrector`` for pushes) and the closed
loop that records every frame of the corrected episodes for fine-tuning (``corrected``,
``lang2policy record corrections``). The top wing: it drives a rollout (``eval``) through the
skill's shaping and limits (``skill``) and writes a dataset (``dataset``).
"""
