//! Evaluates the conditions of `.if`/`.elif` blocks and of the `-cc` command-line option
//! (manual §2.4).
//!
//! [`crate::preprocess`] lexes a `.if` line, joins the words after the directive with single
//! spaces (so spaces around commas become part of the arguments, exactly as the manual warns)
//! and hands the string to [`eval`]. `eval` parses the whole expression into a small tree first
//! and only then evaluates it, so a typo is reported even in an operand that `&&`/`||` would not
//! need to look at. Everything the predicates need to know about the outside world (environment,
//! features, run-time options, version) comes in through [`CondContext`].
//!
//! Grammar (one function per rule in [`Parser`]):
//!
//! ```text
//! expr      := and_expr ( "||" and_expr )*
//! and_expr  := unary ( "&&" unary )*
//! unary     := "!" unary | primary
//! primary   := "(" expr ")" | integer | predicate
//! predicate := name [ "(" [ arg ( "," arg )* ] ")" ]
//! ```
//!
//! Read [`eval`] first.

use std::cmp::Ordering;
use std::fmt;

/// What the predicates may ask about the process that evaluates the condition.
#[derive(Clone, Copy)]
pub struct CondContext<'a> {
    /// The environment, answering `defined(name)` (`None` = not set).
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
    /// The names `feature(name)` answers true for (the `+NAME` entries of `sluice -vv`).
    pub features: &'a [&'a str],
    /// The names `enabled(opt)` answers true for (`POLL`, `EPOLL`, `REUSEPORT`, ...).
    pub enabled: &'a [&'a str],
    /// The version `version_atleast`/`version_before` compare against, e.g. `"2.6"`.
    pub version: &'a str,
}

impl fmt::Debug for CondContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CondContext")
            .field("features", &self.features)
            .field("enabled", &self.enabled)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Why a condition could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CondError {
    /// A name that is not one of the §2.4 predicates.
    UnknownPredicate(String),
    /// A predicate was given the wrong number of arguments.
    WrongArgCount {
        /// The predicate's name.
        predicate: String,
        /// How many it takes.
        expected: usize,
        /// How many were given.
        found: usize,
    },
    /// The argument list of a predicate has no closing `)`.
    UnclosedArgs(String),
    /// A quote inside a predicate argument was not closed.
    UnterminatedQuote,
    /// A `(` grouping a sub-expression has no matching `)`.
    MissingCloseParen,
    /// A term was expected (a number, a predicate, `!` or `(`); holds what was found instead,
    /// empty at the end of the condition.
    ExpectedTerm(String),
    /// Something follows a complete expression (for instance an unmatched `)`).
    TrailingGarbage(String),
    /// A version argument (or the running version) is not of the form `2.4`, `2.4.1` or
    /// `2.4-dev19`.
    BadVersion(String),
    /// More nested parentheses or `!` than any real condition needs.
    TooDeep,
}

impl fmt::Display for CondError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CondError::UnknownPredicate(name) => write!(f, "unknown predicate '{name}'"),
            CondError::WrongArgCount {
                predicate,
                expected,
                found,
            } => {
                let plural = if *expected == 1 { "" } else { "s" };
                write!(
                    f,
                    "'{predicate}' takes {expected} argument{plural}, {found} given"
                )
            }
            CondError::UnclosedArgs(name) => {
                write!(f, "missing ')' after the arguments of '{name}'")
            }
            CondError::UnterminatedQuote => f.write_str("unterminated quote in an argument"),
            CondError::MissingCloseParen => f.write_str("missing ')'"),
            CondError::ExpectedTerm(found) if found.is_empty() => {
                f.write_str("unexpected end of condition, a term is missing")
            }
            CondError::ExpectedTerm(found) => write!(f, "expected a term, found '{found}'"),
            CondError::TrailingGarbage(rest) => write!(f, "unexpected '{rest}' after condition"),
            CondError::BadVersion(v) => write!(f, "invalid version '{v}'"),
            CondError::TooDeep => f.write_str("condition nested too deeply"),
        }
    }
}

impl std::error::Error for CondError {}

/// Evaluates a `.if`/`.elif`/`-cc` condition (§2.4).
///
/// `expr` is the condition's words joined with single spaces. The empty condition is false,
/// `0` is false and any other integer is true. The predicates are `defined(name)`,
/// `feature(name)`, `enabled(opt)`, `streq(a,b)`, `strneq(a,b)`, `strstr(a,b)` (b found in a),
/// `version_atleast(v)` and `version_before(v)`. Sluice does not link an SSL library, so
/// `openssl_version_atleast`, `openssl_version_before`, `ssllib_name_startswith`,
/// `awslc_api_atleast`, `awslc_api_before` and `fips_mode` are accepted but always false.
/// Terms combine with `!`, `&&` (binding tighter) and `||`, and group with parentheses.
///
/// Arguments are split on commas and keep their spaces; `"..."` or `'...'` quote an argument
/// so it may contain commas or parentheses, and outside single quotes a backslash takes the
/// next character literally.
pub fn eval(expr: &str, ctx: &CondContext) -> Result<bool, CondError> {
    let mut parser = Parser {
        text: expr,
        pos: 0,
        depth: 0,
    };
    parser.skip_blanks();
    if parser.at_end() {
        return Ok(false);
    }
    let tree = parser.expr()?;
    parser.skip_blanks();
    if !parser.at_end() {
        return Err(CondError::TrailingGarbage(parser.rest().to_string()));
    }
    tree.eval(ctx)
}

/// Deep enough for any hand-written condition, small enough that recursion cannot overflow
/// the stack.
const MAX_DEPTH: usize = 64;

/// A parsed condition.
#[derive(Debug)]
enum Node {
    Const(bool),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
    Pred(Pred),
}

/// A predicate with its arguments already checked.
#[derive(Debug)]
enum Pred {
    Defined(String),
    Feature(String),
    Enabled(String),
    StrEq(String, String),
    StrNeq(String, String),
    StrStr(String, String),
    VersionAtLeast(Version),
    VersionBefore(Version),
    /// The SSL-library predicates: Sluice has no SSL library, so they are always false.
    NoSslLibrary,
}

impl Node {
    /// Evaluates the tree. `&&` stops at the first false operand and `||` at the first true
    /// one; since operands have no side effects, the order the manual gives for `||` (right to
    /// left) does not change the result.
    fn eval(&self, ctx: &CondContext) -> Result<bool, CondError> {
        Ok(match self {
            Node::Const(b) => *b,
            Node::Not(inner) => !inner.eval(ctx)?,
            Node::And(terms) => {
                for term in terms {
                    if !term.eval(ctx)? {
                        return Ok(false);
                    }
                }
                true
            }
            Node::Or(terms) => {
                for term in terms {
                    if term.eval(ctx)? {
                        return Ok(true);
                    }
                }
                false
            }
            Node::Pred(pred) => pred.eval(ctx)?,
        })
    }
}

impl Pred {
    fn eval(&self, ctx: &CondContext) -> Result<bool, CondError> {
        Ok(match self {
            Pred::Defined(name) => (ctx.lookup)(name).is_some(),
            Pred::Feature(name) => ctx.features.contains(&name.as_str()),
            Pred::Enabled(name) => ctx.enabled.contains(&name.as_str()),
            Pred::StrEq(a, b) => a == b,
            Pred::StrNeq(a, b) => a != b,
            Pred::StrStr(a, b) => a.contains(b.as_str()),
            Pred::VersionAtLeast(v) => running_version(ctx)?.cmp(v) != Ordering::Less,
            Pred::VersionBefore(v) => running_version(ctx)?.cmp(v) == Ordering::Less,
            Pred::NoSslLibrary => false,
        })
    }
}

fn running_version(ctx: &CondContext) -> Result<Version, CondError> {
    Version::parse(ctx.version).ok_or_else(|| CondError::BadVersion(ctx.version.to_string()))
}

/// A version as `haproxy -v` prints it: numeric components, then an optional `-devN`, `-preN`
/// or `-rcN`. Field order gives the ordering: missing components count as zero (trailing zeros
/// are dropped), and a development stage sorts before the release (`2.4-dev19 < 2.4`).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Version {
    numbers: Vec<u32>,
    /// 0 = dev, 1 = pre, 2 = rc, 3 = release.
    stage: u8,
    stage_number: u32,
}

impl Version {
    fn parse(text: &str) -> Option<Version> {
        let (main, suffix) = match text.split_once('-') {
            Some((main, suffix)) => (main, Some(suffix)),
            None => (text, None),
        };
        let mut numbers = main
            .split('.')
            .map(parse_digits)
            .collect::<Option<Vec<u32>>>()?;
        while numbers.last() == Some(&0) {
            numbers.pop();
        }
        let (stage, stage_number) = match suffix {
            None => (3, 0),
            Some(s) => {
                let (stage, digits) = if let Some(d) = s.strip_prefix("dev") {
                    (0, d)
                } else if let Some(d) = s.strip_prefix("pre") {
                    (1, d)
                } else if let Some(d) = s.strip_prefix("rc") {
                    (2, d)
                } else {
                    return None;
                };
                (stage, parse_digits(digits)?)
            }
        };
        Some(Version {
            numbers,
            stage,
            stage_number,
        })
    }
}

/// A non-empty run of ASCII digits that fits in a `u32`.
fn parse_digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The recursive-descent parser: one method per grammar rule, `pos` a byte offset into `text`.
struct Parser<'e> {
    text: &'e str,
    pos: usize,
    /// Current nesting of `(` and `!`, bounded by [`MAX_DEPTH`].
    depth: usize,
}

impl<'e> Parser<'e> {
    fn rest(&self) -> &'e str {
        self.text.get(self.pos..).unwrap_or_default()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// Spaces between terms and operators are not significant (inside arguments they are).
    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// Consumes `token` if the text continues with it.
    fn eat(&mut self, token: &str) -> bool {
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    /// Guards the recursive rules against unbounded nesting.
    fn enter(&mut self) -> Result<(), CondError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(CondError::TooDeep);
        }
        Ok(())
    }

    /// `expr := and_expr ( "||" and_expr )*`
    fn expr(&mut self) -> Result<Node, CondError> {
        let mut terms = vec![self.and_expr()?];
        loop {
            self.skip_blanks();
            if !self.eat("||") {
                break;
            }
            terms.push(self.and_expr()?);
        }
        Ok(if terms.len() == 1 {
            terms.pop().unwrap_or(Node::Const(false))
        } else {
            Node::Or(terms)
        })
    }

    /// `and_expr := unary ( "&&" unary )*`
    fn and_expr(&mut self) -> Result<Node, CondError> {
        let mut terms = vec![self.unary()?];
        loop {
            self.skip_blanks();
            if !self.eat("&&") {
                break;
            }
            terms.push(self.unary()?);
        }
        Ok(if terms.len() == 1 {
            terms.pop().unwrap_or(Node::Const(false))
        } else {
            Node::And(terms)
        })
    }

    /// `unary := "!" unary | primary`
    fn unary(&mut self) -> Result<Node, CondError> {
        self.skip_blanks();
        if self.eat("!") {
            self.enter()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Node::Not(Box::new(inner)));
        }
        self.primary()
    }

    /// `primary := "(" expr ")" | integer | predicate`
    fn primary(&mut self) -> Result<Node, CondError> {
        self.skip_blanks();
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                self.enter()?;
                let inner = self.expr()?;
                self.depth -= 1;
                self.skip_blanks();
                if !self.eat(")") {
                    return Err(CondError::MissingCloseParen);
                }
                Ok(inner)
            }
            Some(b) if b.is_ascii_digit() || b == b'-' => self.integer(),
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => self.predicate(),
            _ => Err(CondError::ExpectedTerm(self.rest().to_string())),
        }
    }

    /// `integer := "-"? digit+` — false when zero, true otherwise. Looking at the digits rather
    /// than converting them means no integer is too large.
    fn integer(&mut self) -> Result<Node, CondError> {
        let start = self.pos;
        self.eat("-");
        let digits_start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = self.text.get(digits_start..self.pos).unwrap_or_default();
        let glued = self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if digits.is_empty() || glued {
            let end = self.word_end();
            let word = self.text.get(start..end).unwrap_or_default();
            return Err(CondError::ExpectedTerm(word.to_string()));
        }
        Ok(Node::Const(digits.bytes().any(|b| b != b'0')))
    }

    /// End of the word starting at `pos`, for error messages.
    fn word_end(&self) -> usize {
        let rest = self.rest();
        let len = rest
            .find([' ', '\t', '(', ')', '&', '|'])
            .unwrap_or(rest.len());
        self.pos + len
    }

    /// `predicate := name [ "(" args ")" ]`
    fn predicate(&mut self) -> Result<Node, CondError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            self.pos += 1;
        }
        let name = self.text.get(start..self.pos).unwrap_or_default();
        // The '(' must touch the name: "defined (X)" is "defined" without arguments, then junk.
        let args = if self.eat("(") {
            self.args(name)?
        } else {
            Vec::new()
        };
        build_predicate(name, args).map(Node::Pred)
    }

    /// `args := [ arg ( "," arg )* ] ")"`, called just after the `(`. An empty list `()` has
    /// no arguments; `(,)` has two empty ones.
    fn args(&mut self, name: &str) -> Result<Vec<String>, CondError> {
        let mut args = Vec::new();
        if self.eat(")") {
            return Ok(args);
        }
        let mut current = String::new();
        loop {
            let rest = self.rest();
            let Some(c) = rest.chars().next() else {
                return Err(CondError::UnclosedArgs(name.to_string()));
            };
            self.pos += c.len_utf8();
            match c {
                ',' => args.push(std::mem::take(&mut current)),
                ')' => {
                    args.push(current);
                    return Ok(args);
                }
                '\'' => {
                    let inner = self.rest();
                    let Some(len) = inner.find('\'') else {
                        return Err(CondError::UnterminatedQuote);
                    };
                    current.push_str(inner.get(..len).unwrap_or_default());
                    self.pos += len + 1;
                }
                '"' => self.double_quoted_arg(&mut current)?,
                '\\' => current.push(self.escaped(CondError::UnclosedArgs(name.to_string()))?),
                _ => current.push(c),
            }
        }
    }

    /// The character after a backslash in an argument, taken literally; `missing` if the
    /// condition ends there.
    fn escaped(&mut self, missing: CondError) -> Result<char, CondError> {
        let c = self.rest().chars().next().ok_or(missing)?;
        self.pos += c.len_utf8();
        Ok(c)
    }

    /// The inside of a `"..."` argument: a backslash takes the next character literally.
    fn double_quoted_arg(&mut self, out: &mut String) -> Result<(), CondError> {
        loop {
            let Some(c) = self.rest().chars().next() else {
                return Err(CondError::UnterminatedQuote);
            };
            self.pos += c.len_utf8();
            match c {
                '"' => return Ok(()),
                '\\' => out.push(self.escaped(CondError::UnterminatedQuote)?),
                _ => out.push(c),
            }
        }
    }
}

/// Checks a predicate's name and argument count and builds it.
fn build_predicate(name: &str, args: Vec<String>) -> Result<Pred, CondError> {
    let expected = match name {
        "fips_mode" => 0,
        "defined"
        | "feature"
        | "enabled"
        | "version_atleast"
        | "version_before"
        | "openssl_version_atleast"
        | "openssl_version_before"
        | "ssllib_name_startswith"
        | "awslc_api_atleast"
        | "awslc_api_before" => 1,
        "streq" | "strneq" | "strstr" => 2,
        _ => return Err(CondError::UnknownPredicate(name.to_string())),
    };
    if args.len() != expected {
        return Err(CondError::WrongArgCount {
            predicate: name.to_string(),
            expected,
            found: args.len(),
        });
    }
    let mut args = args.into_iter();
    let mut next = || args.next().unwrap_or_default();
    let version = |v: String| Version::parse(&v).ok_or(CondError::BadVersion(v));
    Ok(match name {
        "defined" => Pred::Defined(next()),
        "feature" => Pred::Feature(next()),
        "enabled" => Pred::Enabled(next()),
        "streq" => Pred::StrEq(next(), next()),
        "strneq" => Pred::StrNeq(next(), next()),
        "strstr" => Pred::StrStr(next(), next()),
        "version_atleast" => Pred::VersionAtLeast(version(next())?),
        "version_before" => Pred::VersionBefore(version(next())?),
        _ => Pred::NoSslLibrary,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SET" => Some("yes".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    const FEATURES: &[&str] = &["LINUX_SPLICE", "REGEX"];
    const ENABLED: &[&str] = &["EPOLL", "REUSEPORT"];

    fn ctx_with_version(version: &'static str) -> CondContext<'static> {
        CondContext {
            lookup: &env,
            features: FEATURES,
            enabled: ENABLED,
            version,
        }
    }

    fn ev(expr: &str) -> bool {
        eval(expr, &ctx_with_version("2.6")).unwrap()
    }

    fn err(expr: &str) -> CondError {
        eval(expr, &ctx_with_version("2.6")).unwrap_err()
    }

    /// Asserts each condition is true, against version 2.6.
    fn all_true(exprs: &[&str]) {
        for expr in exprs {
            assert!(ev(expr), "{expr}");
        }
    }

    fn all_false(exprs: &[&str]) {
        for expr in exprs {
            assert!(!ev(expr), "{expr}");
        }
    }

    /// Asserts the error message of each condition.
    fn messages(cases: &[(&str, &str)]) {
        for (expr, msg) in cases {
            assert_eq!(err(expr).to_string(), *msg, "{expr}");
        }
    }

    #[test]
    fn empty_and_integers() {
        all_false(&["", "   ", "0", "000", "-0"]);
        all_true(&["1", "-3", "99999999999999999999999999"]);
        assert_eq!(err("1x"), CondError::ExpectedTerm("1x".into()));
        assert_eq!(err("-"), CondError::ExpectedTerm("-".into()));
        assert_eq!(err("1.5"), CondError::ExpectedTerm("1.5".into()));
    }

    #[test]
    fn defined() {
        all_true(&["defined(SET)", "defined(EMPTY)"]);
        // Spaces are part of the argument (§2.4).
        all_false(&["defined(UNSET)", "defined( SET )"]);
    }

    #[test]
    fn feature_and_enabled() {
        all_true(&["feature(REGEX)", "enabled(EPOLL)"]);
        all_false(&["feature(OPENSSL)", "feature(regex)", "enabled(KQUEUE)"]);
    }

    #[test]
    fn string_predicates() {
        all_true(&[
            "streq(a,a)",
            "streq(,)",
            "strneq(a,b)",
            "strstr(haystack,st)",
            "strstr(a,)",
        ]);
        all_false(&[
            "streq(a,b)",
            "streq(0, 0)",
            "strneq(a,a)",
            "strstr(st,haystack)",
        ]);
    }

    #[test]
    fn quoted_arguments() {
        all_true(&[
            r#"streq("a,b",'a,b')"#,
            r#"streq("(x)",'(x)')"#,
            r#"streq("a\"b",a\"b)"#,
            r#"streq('a\b',"a\\b")"#,
            r#"streq("",'')"#,
            r#"streq(x"y"z,xyz)"#,
            "streq(é,é)",
        ]);
        assert_eq!(err(r#"streq("a,b)"#), CondError::UnterminatedQuote);
        assert_eq!(err("streq('a,b)"), CondError::UnterminatedQuote);
        messages(&[("streq('a", "unterminated quote in an argument")]);
    }

    #[test]
    fn versions() {
        all_true(&[
            "version_atleast(2.6)",
            "version_atleast(2.6.0)",
            "version_atleast(2.4)",
            "version_atleast(2.4-dev19)",
            "version_atleast(2)",
            "version_before(2.7)",
            "version_before(2.6.1)",
        ]);
        all_false(&[
            "version_atleast(2.6.1)",
            "version_atleast(3.0)",
            "version_before(2.6)",
            "version_before(2.5)",
        ]);
        // A development version sorts before its release, in stage order.
        let dev = ctx_with_version("2.4-dev19");
        for (expr, want) in [
            ("version_before(2.4)", true),
            ("version_atleast(2.4-dev18)", true),
            ("version_atleast(2.4-dev20)", false),
            ("version_before(2.4-pre1)", true),
            ("version_before(2.4-rc1)", true),
            ("version_atleast(2.3.99)", true),
        ] {
            assert_eq!(eval(expr, &dev), Ok(want), "{expr}");
        }
        let rc = ctx_with_version("2.4-rc2");
        assert_eq!(eval("version_atleast(2.4-pre3)", &rc), Ok(true));
        assert_eq!(eval("version_before(2.4.0)", &rc), Ok(true));
    }

    #[test]
    fn bad_versions() {
        let bad = [
            "a",
            "2.",
            "2..4",
            "2.4-beta1",
            "2.4-dev",
            "2.4-devx",
            " 2.4",
            "99999999999",
        ];
        for v in bad {
            let got = err(&format!("version_atleast({v})"));
            assert_eq!(got, CondError::BadVersion(v.into()), "{v}");
        }
        assert_eq!(
            err(r#"version_atleast("")"#),
            CondError::BadVersion(String::new())
        );
        messages(&[("version_before(x)", "invalid version 'x'")]);
        let broken = ctx_with_version("nightly");
        let got = eval("version_atleast(2.4)", &broken);
        assert_eq!(got, Err(CondError::BadVersion("nightly".into())));
    }

    #[test]
    fn ssl_predicates_are_false() {
        all_false(&[
            "openssl_version_atleast(1.1.1)",
            "openssl_version_before(9.0)",
            "ssllib_name_startswith(OpenSSL)",
            "awslc_api_atleast(1)",
            "awslc_api_before(99)",
            "fips_mode()",
            "fips_mode",
        ]);
        all_true(&["!fips_mode()"]);
    }

    #[test]
    fn negation() {
        all_true(&["!0", "!!1", "! defined(UNSET)", "!(0 || 0)"]);
        all_false(&["!1", "!!0"]);
        assert_eq!(err("!"), CondError::ExpectedTerm(String::new()));
    }

    #[test]
    fn and_binds_tighter_than_or() {
        all_true(&[
            "1 || 1 && 0",
            "0 && 1 || 1",
            "1 && 1 || 0 && 0",
            "0||1",
            "1 && 1 && 1",
        ]);
        all_false(&["(1 || 1) && 0", "0 && 1 || 1 && 0", "1&&0", "0 || 0 || 0"]);
    }

    #[test]
    fn manual_example() {
        all_true(&[r#"feature(REGEX) && (streq("yes",yes) || streq("",yes))"#]);
    }

    #[test]
    fn errors_in_unevaluated_operands_are_still_reported() {
        assert_eq!(
            err("1 || nope(x)"),
            CondError::UnknownPredicate("nope".into())
        );
        assert_eq!(
            err("0 && version_atleast(x)"),
            CondError::BadVersion("x".into())
        );
    }

    #[test]
    fn unknown_predicates_and_arg_counts() {
        assert_eq!(err("nope(x)"), CondError::UnknownPredicate("nope".into()));
        let want = CondError::WrongArgCount {
            predicate: "defined".into(),
            expected: 1,
            found: 0,
        };
        assert_eq!(err("defined()"), want);
        messages(&[
            ("nope", "unknown predicate 'nope'"),
            ("defined", "'defined' takes 1 argument, 0 given"),
            ("streq(a)", "'streq' takes 2 arguments, 1 given"),
            ("streq(a,b,c)", "'streq' takes 2 arguments, 3 given"),
            ("fips_mode(x)", "'fips_mode' takes 0 arguments, 1 given"),
            // The '(' must touch the name.
            ("defined (SET)", "'defined' takes 1 argument, 0 given"),
        ]);
    }

    #[test]
    fn parentheses() {
        all_true(&["(1)", "( ( 1 ) )"]);
        assert_eq!(err("(1"), CondError::MissingCloseParen);
        assert_eq!(err("1)"), CondError::TrailingGarbage(")".into()));
        assert_eq!(err("()"), CondError::ExpectedTerm(")".into()));
        assert_eq!(
            err("defined(SET"),
            CondError::UnclosedArgs("defined".into())
        );
        assert_eq!(err("streq(a\\"), CondError::UnclosedArgs("streq".into()));
        messages(&[
            ("(1", "missing ')'"),
            (
                "defined(SET",
                "missing ')' after the arguments of 'defined'",
            ),
        ]);
    }

    #[test]
    fn trailing_garbage_and_missing_terms() {
        assert_eq!(err("1 2"), CondError::TrailingGarbage("2".into()));
        assert_eq!(err("1 &&"), CondError::ExpectedTerm(String::new()));
        assert_eq!(err("|| 1"), CondError::ExpectedTerm("|| 1".into()));
        assert_eq!(err("1 & 1"), CondError::TrailingGarbage("& 1".into()));
        assert_eq!(err("defined(SET)x"), CondError::TrailingGarbage("x".into()));
        messages(&[
            ("1 2", "unexpected '2' after condition"),
            ("1 &&", "unexpected end of condition, a term is missing"),
            ("\"1\"", "expected a term, found '\"1\"'"),
        ]);
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(err(&deep), CondError::TooDeep);
        assert_eq!(err(&"!".repeat(10_000)), CondError::TooDeep);
        assert_eq!(
            CondError::TooDeep.to_string(),
            "condition nested too deeply"
        );
        let ok = format!("{}1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert!(ev(&ok));
    }
}
