"""The trained VLA at run time: ``runtime.VLAPolicy`` reads a model directory and turns camera
images, joint state and an instruction into the next joint target, with ACT temporal
ensembling of its action chunks (``ensemble``) and checks on what a caller hands it
(``inputs``). It sits on ``model``; the policy backends (``backends``) and training's
evaluation use it.
"""
