// EmberClient: the client library (Database, DatabaseReference, ...).
