// EmberStorage module.
