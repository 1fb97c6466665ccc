// EmberServer module.
