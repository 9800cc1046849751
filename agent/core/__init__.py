"""The daemon core: config, tool runner, scheduler, snapshot store, rendering, textfile output."""
