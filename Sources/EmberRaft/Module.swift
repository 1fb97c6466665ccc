// EmberRaft module.
