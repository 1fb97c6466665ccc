// EmberRules: Firebase Realtime Database security rules (parse, type-check, evaluate). Pure:
// time, auth and data are all inputs, so the same rules and inputs always give the same answer.
// Must not: do I/O or read a clock; data is read only through `RulesDataSource`.
//
// Pipeline, one file each: RulesJSON (positional JSON with comments) → RulesLoader (RuleNode
// tree, RuleTree.swift) → Lexer/Parser (AST) → TypeChecker (refuse bad rules at load, with the
// line) → Evaluator over Value/Snapshot → RulesEngine (read/set/update decisions). RulesLimits
// names every bound.
//
// Semantics in brief:
// * `.read`/`.write` cascade: the first true rule from the root down to the location grants;
//   deeper rules cannot revoke. No grant → deny. Rules are not filters.
// * `.validate` runs (after a write grant) at every location whose data the write creates or
//   changes, ancestors included, never where the new data is null (deletes). Unchanged subtrees
//   and rule subtrees without `.validate` are skipped.
// * A literal key beats the sibling `$wildcard`; a wildcard binds its key as a string variable.
// * A multi-path update needs a `.write` grant for every part and validates the combined result.
// * Any evaluation error (null receiver, missing member, run-time type mismatch, a step limit)
//   makes that condition false.
