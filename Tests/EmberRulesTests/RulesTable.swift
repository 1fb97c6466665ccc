/// The rules table: cases from Firebase's Realtime Database rules documentation
/// (core-syntax, rules-conditions, data validation, the rules reference).
enum RulesTable {
    static let alice = #"{"uid": "alice", "provider": "password", "token": {"email": "alice@example.com", "email_verified": true, "admin": true}}"#
    static let bob = #"{"uid": "bob", "provider": "password", "token": {"email": "bob@gmail.com", "email_verified": false}}"#
    static let carol = #"{"uid": "carol", "token": {}}"#  // a token without claims

    static let all: [RuleCase] =
        defaultDeny + ownerOnly + stringValidation + timestamps + rootLookups + cascading
        + validateDeletes + otherWildcard + hasChildren + multiPath + stringMethods + ternary
        + dataVsNewData + authToken + expressions + snapshots + wildcards + rootValidate
        + validateNeedsWrite + identities + chatApp

    static let defaultDeny = scenario("default deny", rules: #"{"rules": {"foo": {".read": true}}}"#, data: #"{"foo": {"a": 1}, "bar": 2}"#, [
        .read("/bar", false, "no rule at or above /bar"),
        .read("/", false, "rules are not filters: root is not readable"),
        .read("/foo", true, "granted location"),
        .read("/foo/a/deep", true, "below a grant"),
        .set("/foo/a", "2", auth: alice, false, "no .write anywhere"),
    ]) + scenario("empty rules", rules: #"{"rules": {}}"#, [
        .read("/", auth: alice, false, "empty rules deny reads"),
        .set("/x", "1", auth: alice, false, "empty rules deny writes"),
    ])

    static let ownerOnly = scenario("owner-only /users/$uid", rules: #"""
        {"rules": {"users": {"$uid": {
            ".read": "auth != null && auth.uid == $uid",
            ".write": "auth != null && auth.uid == $uid"
        }}}}
        """#, data: #"{"users": {"alice": {"name": "Alice"}, "bob": {"name": "Bob"}}}"#, [
        .read("/users/alice", auth: alice, true, "owner reads own record"),
        .read("/users/alice/name", auth: alice, true, "owner reads below own record"),
        .read("/users/bob", auth: alice, false, "other user's record"),
        .read("/users/alice", false, "unauthenticated"),
        .read("/users", auth: alice, false, "the list itself"),
        .set("/users/alice/name", #""Al""#, auth: alice, true, "owner writes"),
        .set("/users/bob/name", #""Al""#, auth: alice, false, "writes another user's record"),
        .set("/users/alice", "null", auth: alice, true, "owner deletes"),
        .set("/users/alice", #"{"name": "x"}"#, false, "unauthenticated write"),
    ])

    static let stringValidation = scenario("newData type and length", rules: #"""
        {"rules": {"messages": {"$id": {
            ".write": true,
            ".validate": "newData.isString() && newData.val().length < 100"
        }}}}
        """#, data: #"{"messages": {"m1": "old"}}"#, [
        .set("/messages/m2", #""hello""#, true, "short string"),
        .set("/messages/m2", "123", false, "number"),
        .set("/messages/m2", #"{"text": "hi"}"#, false, "object"),
        .set("/messages/m2", "\"" + String(repeating: "x", count: 99) + "\"", true, "99 characters"),
        .set("/messages/m2", "\"" + String(repeating: "x", count: 100) + "\"", false, "100 characters"),
        .set("/messages/m1", "null", true, "delete is not validated"),
        .update("/messages", [("m3", #""a""#), ("m4", "true")], false, "update with one invalid child"),
    ])

    static let timestamps = scenario("now", rules: #"""
        {"rules": {"posts": {"$id": {
            ".write": true,
            "ts": {".validate": "newData.isNumber() && newData.val() <= now"},
            "expires": {".validate": "newData.val() > now + 1000"}
        }}}}
        """#, [
        .set("/posts/p1/ts", "999", now: 1000, true, "timestamp in the past"),
        .set("/posts/p1/ts", "1000", now: 1000, true, "timestamp equal to now"),
        .set("/posts/p1/ts", "1001", now: 1000, false, "timestamp in the future"),
        .set("/posts/p1/ts", #""999""#, now: 1000, false, "string timestamp"),
        .set("/posts/p1", #"{"ts": 5, "expires": 2001}"#, now: 1000, true, "expires far enough ahead"),
        .set("/posts/p1", #"{"ts": 5, "expires": 2000}"#, now: 1000, false, "expires too soon"),
    ])

    static let rootLookups = scenario("root lookups", rules: #"""
        {"rules": {
            "content": {".write": "root.child('admins').child(auth.uid).exists()", ".read": "auth != null"},
            "admins": {".read": "root.child('admins/' + auth.uid).val() === true"}
        }}
        """#, data: #"{"admins": {"alice": true, "bob": false}}"#, [
        .set("/content/page", #""x""#, auth: alice, true, "admin writes"),
        .set("/content/page", #""x""#, auth: bob, true, "admins entry exists even if false"),
        .set("/content/page", #""x""#, auth: carol, false, "not in admins"),
        .set("/content/page", #""x""#, false, "auth.uid on null auth is an error"),
        .read("/admins", auth: alice, true, "path concatenation in child()"),
        .read("/admins", auth: bob, false, "admins value false"),
    ])

    static let cascading = scenario("cascading grants", rules: #"""
        {"rules": {
            "foo": {".read": true, ".write": "auth != null", "bar": {".read": false, ".write": false}},
            "a": {"b": {".read": true}}
        }}
        """#, [
        .read("/foo/bar", true, "parent grant cannot be revoked"),
        .set("/foo/bar", "1", auth: alice, true, "parent write grant cannot be revoked"),
        .set("/foo/bar", "1", false, "parent write condition false; child false"),
        .read("/a", false, "grant only deeper"),
        .read("/a/b", true, "deeper grant"),
        .read("/a/b/c", true, "below deeper grant"),
        .set("/a/b", "1", auth: alice, false, "read grant is not a write grant"),
    ])

    static let validateDeletes = scenario(".validate and deletes", rules: #"""
        {"rules": {"items": {".write": true, "$id": {".validate": "newData.hasChildren(['name'])"}}}}
        """#, data: #"{"items": {"x": {"name": "n", "other": 1}}}"#, [
        .set("/items/x", "null", true, "deleting the node is not validated"),
        .set("/items", "null", true, "deleting the parent is not validated"),
        .set("/items/y", #"{"name": "m"}"#, true, "valid new item"),
        .set("/items/y", #"{"other": 2}"#, false, "invalid new item"),
        .set("/items/x/name", "null", false, "deleting a required child fails the parent's validate"),
        .set("/items/x/other", "null", true, "deleting an optional child"),
        .set("/items/x/other", "2", true, "ancestor validate holds after a child write"),
    ])

    static let otherWildcard = scenario("$other with literal siblings", rules: #"""
        {"rules": {"widget": {
            ".write": true,
            "title": {".validate": "newData.isString()"},
            "color": {".validate": "newData.val().matches(/^(red|green|blue)$/)"},
            "$other": {".validate": false}
        }}}
        """#, [
        .set("/widget", #"{"title": "t", "color": "red"}"#, true, "only known children"),
        .set("/widget", #"{"title": "t", "size": 3}"#, false, "an unknown child"),
        .set("/widget/size", "3", false, "write to an unknown child"),
        .set("/widget/title", #""x""#, true, "literal key beats the wildcard"),
        .set("/widget/color", #""pink""#, false, "literal rule applies"),
        .set("/widget/size", "null", true, "deleting an unknown child is not validated"),
    ])

    static let hasChildren = scenario("hasChildren", rules: #"""
        {"rules": {
            "users": {"$uid": {".write": true, ".validate": "newData.hasChildren(['name', 'age'])"}},
            "any": {".write": true, ".validate": "newData.hasChildren()"}
        }}
        """#, data: #"{"users": {"u": {"name": "n", "age": 3}}}"#, [
        .set("/users/v", #"{"name": "n", "age": 3}"#, true, "both keys"),
        .set("/users/v", #"{"name": "n"}"#, false, "one key missing"),
        .set("/users/v", #""n""#, false, "a leaf has no children"),
        .set("/users/u/age", "4", true, "child write keeps both"),
        .set("/any", #"{"a": 1}"#, true, "no argument: has children"),
        .set("/any", #""str""#, false, "no argument: leaf"),
    ])

    static let multiPath = scenario("multi-path update", rules: #"""
        {"rules": {
            "a": {".write": true},
            "b": {".write": false},
            "c": {".write": true, ".validate": "newData.hasChildren(['x', 'y'])"},
            "d": {"$k": {".write": "newData.parent().child('lock').val() !== true"}}
        }}
        """#, data: #"{"c": {"y": 5}}"#, [
        .update("/", [("a/x", "1"), ("b/y", "2")], false, "one part denied"),
        .update("/", [("a/x", "1"), ("a/y", "2")], true, "every part granted"),
        .update("/c", [("x", "1")], true, "validates over the resulting tree"),
        .update("/c", [("x", "1"), ("y", "null")], false, "result misses a required child"),
        .update("/", [("c/x", "1"), ("a/z", "3")], true, "parts under different grants"),
        .update("/d", [("k1", "1"), ("lock", "true")], false, "newData reflects the other parts"),
        .update("/d", [("k1", "1"), ("k2", "2")], true, "no lock in the result"),
    ])

    static let stringMethods = scenario("string methods", rules: #"""
        {"rules": {"s": {".write": true,
            "contains": {".validate": "newData.val().contains('@')"},
            "begins": {".validate": "newData.val().beginsWith('img_')"},
            "ends": {".validate": "newData.val().endsWith('.png')"},
            "lower": {".validate": "newData.val().toLowerCase() == 'hello'"},
            "upper": {".validate": "newData.val().toUpperCase() === \"HELLO\""},
            "replace": {".validate": "newData.val().replace('-', '') == 'abc'"},
            "regex": {".validate": "newData.val().matches(/^[a-z]+[0-9]*$/)"},
            "regexi": {".validate": "newData.val().matches(/^abc$/i)"},
            "email": {".validate": "newData.val().matches(/^[A-Z0-9._%+-]+@[A-Z0-9.-]+\\.[A-Z]{2,4}$/i)"},
            "escape": {".validate": "newData.val() == 'it\\'s' || newData.val() == \"tab\\tx\""},
            "unicode": {".validate": "newData.val().length == 2 && newData.val().contains('e') && newData.val().replace('e', 'a') == 'a\u0301'"}
        }}}
        """#, [
        .set("/s/contains", #""a@b""#, true, "contains"),
        .set("/s/contains", #""ab""#, false, "does not contain"),
        .set("/s/contains", "5", false, "method on a number is an error"),
        .set("/s/begins", #""img_1.png""#, true, "beginsWith"),
        .set("/s/ends", #""img_1.jpg""#, false, "endsWith"),
        .set("/s/lower", #""HeLLo""#, true, "toLowerCase"),
        .set("/s/upper", #""hello""#, true, "toUpperCase with double quotes"),
        .set("/s/replace", #""a-b-c""#, true, "replace replaces every occurrence"),
        .set("/s/regex", #""abc123""#, true, "matches"),
        .set("/s/regex", #""Abc""#, false, "does not match"),
        .set("/s/regexi", #""ABC""#, true, "case-insensitive flag"),
        .set("/s/email", #""Me@Example.org""#, true, "docs email regex"),
        .set("/s/email", #""not-an-email""#, false, "docs email regex rejects"),
        .set("/s/escape", #""it's""#, true, "escaped single quote"),
        .set("/s/escape", #""tab\tx""#, true, "escaped tab"),
        .set("/s/unicode", #""e\u0301""#, true, "code points, not grapheme clusters (as JavaScript)"),
    ])

    static let ternary = scenario("ternary", rules: #"""
        {"rules": {"score": {".write": "auth.uid == 'alice' ? true : newData.val() < 10"}}}
        """#, [
        .set("/score", "100", auth: alice, true, "first branch"),
        .set("/score", "5", auth: bob, true, "second branch true"),
        .set("/score", "50", auth: bob, false, "second branch false"),
    ])

    static let dataVsNewData = scenario("data vs newData", rules: #"""
        {"rules": {
            "once": {"$id": {".write": "!data.exists()"}},
            "counter": {".write": "newData.isNumber() && (data.exists() ? newData.val() == data.val() + 1 : newData.val() == 0)"},
            "docs": {"$id": {".write": "(!data.exists() && newData.child('owner').val() == auth.uid) || data.child('owner').val() == auth.uid"}}
        }}
        """#, data: #"{"once": {"a": 1}, "counter": 5, "docs": {"d1": {"owner": "alice", "title": "t"}}}"#, [
        .set("/once/a", "2", false, "existing data cannot be overwritten"),
        .set("/once/b", "2", true, "new data can be created"),
        .set("/counter", "6", true, "increment by one"),
        .set("/counter", "7", false, "increment by two"),
        .set("/docs/d1/title", #""u""#, auth: alice, true, "owner edits via .write at an ancestor"),
        .set("/docs/d1/title", #""u""#, auth: bob, false, "non-owner edits"),
        .set("/docs/d2", #"{"owner": "bob"}"#, auth: bob, true, "create with self as owner"),
        .set("/docs/d2", #"{"owner": "alice"}"#, auth: bob, false, "create for someone else"),
    ])

    static let authToken = scenario("auth.token", rules: #"""
        {"rules": {
            "verified": {".read": "auth.token.email_verified == true"},
            "company": {".read": "auth.token.email.endsWith('@example.com')"},
            "admin": {".read": "auth.token['admin'] === true"},
            "provider": {".read": "auth.provider == 'password'"}
        }}
        """#, [
        .read("/verified", auth: alice, true, "email verified"),
        .read("/verified", auth: bob, false, "email not verified"),
        .read("/verified", auth: carol, false, "claim missing: error denies"),
        .read("/verified", false, "unauthenticated"),
        .read("/company", auth: alice, true, "email domain"),
        .read("/company", auth: bob, false, "other email domain"),
        .read("/admin", auth: alice, true, "custom claim via []"),
        .read("/admin", auth: bob, false, "custom claim missing"),
        .read("/provider", auth: bob, true, "auth.provider"),
    ])

    static let expressions = scenario("operators and errors", rules: #"""
        {"rules": {"e": {
            "even": {".write": true, ".validate": "newData.val() % 2 == 0"},
            "neg": {".write": true, ".validate": "-newData.val() < 0 && newData.val() * 2 / 4 != 1"},
            "names": {"$uid": {".write": true, ".validate": "'user_' + $uid === newData.val()"}},
            "num": {"$n": {".write": "$n == 5 || $n == '6'"}},
            "safe": {".write": "true || data.val().x.y", ".read": "data.val().length > 0"},
            "strict": {".write": "newData.val() !== null && newData.val() != '1'"},
            "kinds": {".write": true, ".validate": "newData.isBoolean() || newData.child('n').isNumber()"},
            "cmp": {".write": "newData.val() > 'm'"}
        }}}
        """#, data: #"{"e": {"safe": null}}"#, [
        .set("/e/even", "4", true, "modulo"),
        .set("/e/even", "3", false, "odd"),
        .set("/e/neg", "5", true, "unary minus and arithmetic"),
        .set("/e/neg", "2", false, "2 * 2 / 4 == 1"),
        .set("/e/names/bob", #""user_bob""#, true, "string concatenation with a capture"),
        .set("/e/names/bob", #""user_alice""#, false, "concatenation mismatch"),
        .set("/e/num/5", "1", false, "captures are strings: '5' !== 5"),
        .set("/e/num/6", "1", true, "capture equals string"),
        .set("/e/safe", "1", true, "|| short-circuits past an error"),
        .read("/e/safe", false, "length of null is an error"),
        .set("/e/strict", "1", true, "1 !== '1'"),
        .set("/e/strict", #""1""#, false, "'1' != '1' is false"),
        .set("/e/kinds", "true", true, "isBoolean"),
        .set("/e/kinds", #"{"n": 1.5}"#, true, "child isNumber"),
        .set("/e/kinds", #"{"n": "1"}"#, false, "child not a number"),
        .set("/e/cmp", #""z""#, true, "string comparison"),
        .set("/e/cmp", "5", false, "number vs string comparison is an error"),
    ])

    static let snapshots = scenario("snapshot methods", rules: #"""
        {"rules": {
            "rooms": {"$room": {
                ".read": "data.child('members').hasChild(auth.uid)",
                "messages": {"$m": {".write": "root.child('rooms/' + $room + '/members/' + auth.uid).exists()"}}
            }},
            "prio": {".write": true, ".validate": "newData.getPriority() != null && newData.getPriority() > 1"},
            "par": {"x": {".write": "data.parent().child('open').val() == true"}},
            "top": {".write": "data.parent().exists()"},
            "obj": {".write": true, ".validate": "newData.val().kind == 'a' && newData.val().inner.n > 1 && newData.val()['kind'] != data.val()"}
        }}
        """#, data: #"{"rooms": {"r1": {"members": {"alice": true}}}, "par": {"open": true}}"#, [
        .read("/rooms/r1", auth: alice, true, "hasChild"),
        .read("/rooms/r1", auth: bob, false, "hasChild false"),
        .read("/rooms/r2", auth: alice, false, "missing room"),
        .set("/rooms/r1/messages/m1", #""hi""#, auth: alice, true, "member posts"),
        .set("/rooms/r1/messages/m1", #""hi""#, auth: bob, false, "non-member posts"),
        .set("/prio", #"{".value": 1, ".priority": 2}"#, true, "getPriority"),
        .set("/prio", "1", false, "no priority"),
        .set("/par/x", "1", true, "parent()"),
        .set("/top", "1", true, "parent of a top-level node is the root"),
        .set("/obj", #"{"kind": "a", "inner": {"n": 2}}"#, true, "members of val() objects"),
        .set("/obj", #"{"kind": "a", "inner": {"n": 1}}"#, false, "nested member value"),
        .set("/obj", #"{"kind": "a"}"#, false, "missing member of val() is an error"),
    ])

    static let wildcards = scenario("wildcards and literal precedence", rules: #"""
        {"rules": {
            "pub": {"$any": {".write": false}, "open": {".write": true}},
            "rooms": {"$room": {"$msg": {".write": "$room.beginsWith('public_') && $msg.length <= 8"}}}
        }}
        """#, [
        .set("/pub/open", "1", true, "literal sibling grants"),
        .set("/pub/closed", "1", false, "wildcard denies"),
        .set("/rooms/public_1/m1", #""hi""#, true, "two captures"),
        .set("/rooms/private/m1", #""hi""#, false, "outer capture fails"),
        .set("/rooms/public_1/verylongid", #""hi""#, false, "inner capture fails"),
        .update("/rooms", [("public_a/m1", "1"), ("public_b/m2", "2")], true, "update across wildcard children"),
        .update("/rooms", [("public_a/m1", "1"), ("secret/m2", "2")], false, "one wildcard child denied"),
    ])

    static let rootValidate = scenario("validate at the root", rules: #"""
        {"rules": {".write": true, ".validate": "newData.hasChild('version')"}}
        """#, data: #"{"version": 1, "a": 2}"#, [
        .set("/a", "3", true, "root still has version"),
        .set("/version", "null", false, "deleting version fails the root's validate"),
        .set("/", #"{"x": 1}"#, false, "replacing the root without version"),
        .set("/", "null", true, "deleting everything is not validated"),
        .set("/a", "2", true, "writing the same value changes nothing"),
        .update("/", [("a", "null"), ("b", "1")], true, "update keeps version"),
    ])

    static let validateNeedsWrite = scenario(".validate is not a grant", rules: #"""
        {"rules": {"a": {".validate": true}, "b": {".write": true, ".validate": false}}}
        """#, data: #"{"b": 1}"#, [
        .set("/a", "1", false, "validate true without write"),
        .set("/b", "2", false, "validate false with write"),
        .set("/b", "null", true, "delete with validate false"),
    ])

    static let identities = scenario("auth.token.firebase", rules: #"""
        {"rules": {"g": {".read": "auth.token.firebase.sign_in_provider == 'google.com' && auth.token.firebase.identities['email'][0] == 'g@x.com'"}}}
        """#, [
        .read("/g", auth: #"{"uid": "g", "token": {"firebase": {"sign_in_provider": "google.com", "identities": {"email": ["g@x.com"]}}}}"#, true, "provider and identities array"),
        .read("/g", auth: #"{"uid": "g", "token": {"firebase": {"sign_in_provider": "password", "identities": {"email": ["g@x.com"]}}}}"#, false, "other provider"),
        .read("/g", auth: #"{"uid": "g", "token": {"firebase": {"sign_in_provider": "google.com", "identities": {"email": []}}}}"#, false, "index out of range is an error"),
    ])

    /// A complete chat app document in the style of the Firebase docs, comments included.
    static let chatApp = scenario("chat app document", rules: #"""
        {
          // Room names are public to signed-in users.
          "rules": {
            "room_names": {
              ".read": "auth != null",
              "$room_id": {
                ".validate": "newData.isString() && newData.val().length > 0 && newData.val().length <= 32"
              }
            },
            "members": {
              "$room_id": {
                ".read": "auth != null && data.child(auth.uid).exists()",
                "$user_id": {
                  ".write": "auth != null && auth.uid === $user_id",
                  ".validate": "newData.isBoolean()"
                }
              }
            },
            /* Messages: members post once, never edit. */
            "messages": {
              "$room_id": {
                ".read": "root.child('members/' + $room_id + '/' + auth.uid).exists()",
                ".indexOn": ["timestamp"],
                "$message_id": {
                  ".write": "root.child('members/' + $room_id + '/' + auth.uid).val() === true && !data.exists()",
                  ".validate": "newData.hasChildren(['user', 'message', 'timestamp'])",
                  "user": {".validate": "newData.val() === auth.uid"},
                  "message": {".validate": "newData.isString() && newData.val().length < 300"},
                  "timestamp": {".validate": "newData.isNumber() && newData.val() <= now"},
                  "$other": {".validate": false}
                }
              }
            }
          }
        }
        """#, data: #"{"members": {"r1": {"alice": true, "bob": false}}, "messages": {"r1": {"m0": {"user": "alice", "message": "first", "timestamp": 1}}}}"#, [
        .read("/room_names", auth: bob, true, "signed-in users list rooms"),
        .read("/room_names", false, "anonymous users do not"),
        .read("/members/r1", auth: alice, true, "members see the member list"),
        .read("/members/r1", auth: carol, false, "non-members do not"),
        .read("/messages/r1", auth: bob, true, "a member entry (even false) lets one read"),
        .set("/messages/r1/m1", #"{"user": "alice", "message": "hi", "timestamp": 5}"#, auth: alice, now: 10, true, "member posts"),
        .set("/messages/r1/m1", #"{"user": "bob", "message": "hi", "timestamp": 5}"#, auth: alice, now: 10, false, "posting as someone else"),
        .set("/messages/r1/m1", #"{"user": "bob", "message": "hi", "timestamp": 5}"#, auth: bob, now: 10, false, "member flag false"),
        .set("/messages/r1/m1", #"{"user": "alice", "message": "hi", "timestamp": 50}"#, auth: alice, now: 10, false, "timestamp from the future"),
        .set("/messages/r1/m1", #"{"user": "alice", "message": "hi", "timestamp": 5, "x": 1}"#, auth: alice, now: 10, false, "an extra child"),
        .set("/messages/r1/m1", #"{"user": "alice", "message": "hi"}"#, auth: alice, now: 10, false, "a missing child"),
        .set("/messages/r1/m0/message", #""edited""#, auth: alice, now: 10, false, "editing an existing message"),
        .set("/members/r1/carol", "true", auth: carol, true, "joining a room"),
        .set("/members/r1/carol", #""yes""#, auth: carol, false, "member flag must be a boolean"),
        .update("/", [("members/r2/carol", "true"), ("room_names/r2", #""Room 2""#)], auth: carol, false, "room_names has no write rule"),
    ])
}
