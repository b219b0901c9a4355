"""Config-driven training as in PaddleRec: `python -m fleet.rec.static_trainer -m config.yaml`,
`fleet.rec.static_ps_trainer` (parameter-server jobs under fleetrun) and `fleet.rec.static_infer`,
with the config loaded and checked by `fleet.rec.config`."""
