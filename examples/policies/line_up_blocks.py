# Put the blocks in a horizontal line along the near edge of the table, left to right.
import numpy as np

blocks = [n for n in get_obj_names() if n.endswith("block")]
left = get_corner_pos("bottom left")
right = get_corner_pos("bottom right")
near = np.array([0.03, 0.0, 0.0])  # a little in from the edge
for block, point in zip(blocks, np.linspace(left + near, right + near, len(blocks))):
    put_first_on_second(block, point)
go_home()
