"""The verbs, one module each: `add(sub)` declares its parser and options, `command(args, console)`
runs it over the work in the packages below (run/, investigate/, report/, ...). A new verb is one
module here and one line in `cli.VERBS`."""
