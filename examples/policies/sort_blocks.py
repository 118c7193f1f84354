# Put every block into the bowl of the same colour (Code-as-Policies style).
def bowl_for(block):
    return block.replace("block", "bowl")


names = get_obj_names()
for block in [n for n in names if n.endswith("block")]:
    bowl = bowl_for(block)
    if bowl in names:
        say(f"putting the {block} in the {bowl}")
        put_first_on_second(block, bowl)
go_home()
