// EmberCore module.
