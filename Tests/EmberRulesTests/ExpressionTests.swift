import EmberCore
import Testing
@testable import EmberRules

/// Operator precedence and JavaScript-like value semantics, each as a `.read` at the root that
/// must come out `expected` (false also when the expression fails at run time).
enum ExpressionTable {
    static let cases: [(String, Bool)] = [
        ("1 + 2 * 3 == 7", true),
        ("(1 + 2) * 3 == 9", true),
        ("10 - 2 - 3 == 5", true),              // left-associative
        ("12 / 2 / 3 == 2", true),
        ("7 % 3 == 1 && -7 % 3 == -1", true),   // remainder keeps the dividend's sign
        ("-(-3) == 3", true),
        ("1 / 0 > 1e300", true),                // Infinity, as in JavaScript
        ("0.1 + 0.2 != 0.3", true),             // doubles
        ("1 == 1.0", true),
        ("2 < 3 == true", true),                // relational binds tighter than equality
        ("!true == false", true),               // unary binds tighter than equality
        ("true || false && false", true),       // && binds tighter than ||
        ("(false ? 1 : true ? 2 : 3) == 2", true),  // ?: is right-associative
        ("'a' + 1 == 'a1'", true),
        ("'a' + 1.5 == 'a1.5'", true),
        ("1 + 'a' == '1a'", true),
        ("'a' + 'b' + 1 + 2 == 'ab12'", true),
        ("1 + 2 + 'a' == '3a'", true),
        ("'abc'.length == 3", true),
        ("'😀'.length == 2", true),              // UTF-16 code units, as JavaScript
        ("'b' > 'a' && 'B' < 'a' && 'ab' < 'b'", true),
        ("'10' < '9'", true),                   // strings compare as strings
        ("null == null && null != false", true),
        ("'1' !== 1 && '1' != 1", true),
        ("\"dq\" === 'dq'", true),
        ("'\\u0041' == 'A' && 'a\\'b'.length == 3", true),
        ("'a.b.c'.replace('.', '/') == 'a/b/c'", true),
        ("'Hello'.toLowerCase().toUpperCase() == 'HELLO'", true),
        ("'x'.matches(/^X$/i) && !'x'.matches(/^X$/)", true),
        ("'a/b'.matches(/^a\\/b$/) && 'x]'.matches(/[\\]/]/)", true),
        ("'abc'.contains('') && 'abc'.beginsWith('') && 'abc'.endsWith('bc')", true),
        ("auth.uid.length == 5", true),
        ("auth.token.email_verified === true", true),
        ("auth['uid'] == 'alice' && auth.token['email'].endsWith('example.com')", true),
        ("now == 1234", true),
        ("root.exists() == false", true),
        ("!data.exists() && data.val() == null && data.getPriority() == null", true),
        ("data.child('a/b').child('c').parent().parent().exists() == false", true),
        ("auth.missing == null", false),         // missing member: error
        ("auth.uid.foo == null", false),         // member of a string: error
        ("data.val().length > 0", false),        // member of null: error
        ("auth.uid > 5", false),                 // string vs number ordering: error
        ("auth.uid + data.val() == 'alicenull'", true),  // JavaScript ToString of null
        ("auth.token.email_verified && data.child('..').exists()", false),  // invalid path: error
        ("data.child(auth.uid).exists() || true", true),
        ("data.child('').exists() || true", false),   // empty path: error (|| does not rescue it)
        ("false && data.val().x", false),
        ("true && auth.token", false),           // non-boolean operand at run time
        ("auth.token.email_verified ? true : data.val().x", true),
    ]
}

@Test("Expression semantics", arguments: ExpressionTable.cases)
func expression(_ source: String, _ expected: Bool) throws {
    let doc = JSON.object(["rules": .object([".read": .string(source)])]).serialized()
    let engine = try RulesEngine(text: doc)
    let alice = try JSON.parse(RulesTable.alice)
    #expect(engine.canRead(path: .root, auth: alice, root: .empty, now: 1234) == expected, "\(source)")
}
