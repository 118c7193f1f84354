"""The VLA's shared contracts, the lowest wing: what a recorded frame holds (``schema``), the
task families with their phrasings and held-out splits (``tasks``), how a camera image is made
the size a model takes (``image_fit``) and the size limits every VLA loader checks a file or a
server's answer against (``loader_limits``). Every other wing agrees on these, so they import
nothing else of ``vla``.
"""
