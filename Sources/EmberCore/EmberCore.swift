// EmberCore: Ember's data model, shared by every other module — JSON (`JSON`, `JSONMembers`),
// paths and Firebase's key rules (`Path`), the node tree with priorities (`Node`), Firebase
// ordering and query windows, server values, push ids and the wire protocol's hash.
//
// Must not: import anything (not even Foundation), do I/O, or read a clock or a random source —
// time and randomness are parameters, so every replica and every test computes the same result.
