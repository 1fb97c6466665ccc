// EmberRules: Firebase Realtime Database security rules (parse, type-check, evaluate). Pure:
// time, auth and data are all inputs, so the same rules and inputs always give the same answer.
//
// Pipeline: RulesJSON (positional JSON with comments) → RulesLoader (rule tree) → Lexer/Parser
// (expression AST) → TypeChecker (refuse bad rules at load) → Evaluator (per operation) →
// RulesEngine (read/set/update decisions).
