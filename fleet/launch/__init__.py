"""fleetrun: starts and supervises the processes of a Fleet job (see `fleetrun --help`)."""
