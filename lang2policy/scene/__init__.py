"""The MuJoCo tabletop world: robot descriptions, objects, layouts, scene assembly, rendering."""
