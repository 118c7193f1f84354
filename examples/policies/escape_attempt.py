# What a hostile program might try: walk to os.system through the class hierarchy.
# With the AST pre-check on it is rejected before it runs; with --no-ast-check the
# child runs it and the audit hook / seccomp filter stop it. Nothing reaches the host.
classes = ().__class__.__base__.__subclasses__()
wrap = [c for c in classes if c.__name__ == "_wrap_close"][0]
wrap.__init__.__globals__["system"]("touch /tmp/lang2policy-pwned")
