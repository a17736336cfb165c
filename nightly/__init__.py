"""The nightly's own steps (plan, alerts, land), run by the nightly workflow and `make nightly-local`."""
