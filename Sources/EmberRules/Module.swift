// EmberRules: Firebase security rules (parse, type-check, evaluate). Pure.
