"""The verbs, every one, a module each: `add(sub)` declares its parser and options, `command(args, console)`
runs it over the work in the packages below (run/, investigate/, report/, atlas/, portability/, upgrade/,
...), imported when it runs. A new verb is one module here and one line in `cli.VERBS`: the command line
reads in one folder, and building the parser imports no verb's work."""
