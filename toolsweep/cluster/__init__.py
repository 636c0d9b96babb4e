"""The driver: config, connecting to or starting Ray, the scheduler, the CLI."""
