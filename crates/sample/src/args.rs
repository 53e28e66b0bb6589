//! Splitting a sample expression into keywords and their arguments: the second level of
//! quoting of configuration.txt §2.2.
//!
//! The configuration lexer has already cut the line into words and removed the first level
//! of quotes; a word such as `path,regsub("(foo|bar)",blah,g)` reaches [`split_chain`], which
//! returns one [`Call`] per keyword (the fetch, then each converter) with its arguments.
//! Inside the parentheses, double quotes protect commas and parentheses, single quotes
//! protect everything, and a backslash outside single quotes escapes `\`, `"`, `'`, a space,
//! and writes LF, CR and TAB for `\n`, `\r`, `\t`; before any other character it stays as
//! it is (so `"my/\1"` keeps its back-reference and `\,` does not protect a comma, as in
//! HAProxy). Spaces are ordinary characters. The typed readers ([`int_arg`]...) check one
//! argument each with the messages the expression compiler prefixes with the keyword. Read
//! [`split_chain`] first.

use crate::value::parse_int_exact;

/// One keyword of an expression with its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    /// The keyword as written.
    pub name: String,
    /// The arguments, `None` when the keyword had no parentheses. `name()` gives one empty
    /// argument; [`Call::normalized`] turns that into none for keywords whose arguments
    /// are all optional.
    pub args: Option<Vec<String>>,
}

impl Call {
    /// The arguments for a keyword taking at least `min` of them: no parentheses and `()`
    /// both mean no argument when `min` is 0.
    pub fn normalized(&self, min: usize) -> Vec<String> {
        match &self.args {
            None => Vec::new(),
            Some(args) if min == 0 && args.len() == 1 && args[0].is_empty() => Vec::new(),
            Some(args) => args.clone(),
        }
    }
}

/// How the caller names the keyword at `index` in messages.
fn label(index: usize, name: &str) -> String {
    if index == 0 {
        format!("fetch method '{name}'")
    } else {
        format!("converter '{name}'")
    }
}

/// Splits `text` into the fetch and its converters.
///
/// Rejects an empty keyword ("missing fetch method", "missing converter after ','"), an
/// argument list without its `)` or with an unclosed quote, and anything but `,` or the end
/// after a `)` ("missing comma after fetch keyword 'str'").
pub(crate) fn split_chain(text: &str) -> Result<Vec<Call>, String> {
    let bytes = text.as_bytes();
    let mut calls = Vec::new();
    let mut pos = 0;
    loop {
        let start = pos;
        while pos < bytes.len() && bytes[pos] != b'(' && bytes[pos] != b',' {
            pos += 1;
        }
        let name = text.get(start..pos).unwrap_or("").to_string();
        if name.is_empty() {
            return Err(if calls.is_empty() {
                "missing fetch method".to_string()
            } else {
                "missing converter after ','".to_string()
            });
        }
        let mut args = None;
        if bytes.get(pos) == Some(&b'(') {
            let (list, next) = split_args(bytes, pos + 1)
                .map_err(|e| format!("{} : {e}", label(calls.len(), &name)))?;
            args = Some(list);
            pos = next;
            match bytes.get(pos) {
                None | Some(b',') => {}
                Some(_) => {
                    let what = if calls.is_empty() {
                        "fetch keyword"
                    } else {
                        "converter"
                    };
                    return Err(format!("missing comma after {what} '{name}'"));
                }
            }
        }
        calls.push(Call { name, args });
        if pos >= bytes.len() {
            return Ok(calls);
        }
        // Skip the comma separating keywords.
        pos += 1;
        if pos >= bytes.len() {
            return Err("missing converter after ','".to_string());
        }
    }
}

/// Reads the arguments starting at `pos` (just after `(`) up to the unquoted `)`; returns
/// them and the position after the `)`.
fn split_args(bytes: &[u8], mut pos: usize) -> Result<(Vec<String>, usize), String> {
    let mut args = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut quote: Option<u8> = None;
    while let Some(&b) = bytes.get(pos) {
        pos += 1;
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(b'\''), _) => cur.push(b),
            (_, b'\\') => match bytes.get(pos) {
                Some(&e @ (b'\\' | b'"' | b'\'' | b' ')) => {
                    cur.push(e);
                    pos += 1;
                }
                Some(b'n') => {
                    cur.push(b'\n');
                    pos += 1;
                }
                Some(b'r') => {
                    cur.push(b'\r');
                    pos += 1;
                }
                Some(b't') => {
                    cur.push(b'\t');
                    pos += 1;
                }
                _ => cur.push(b'\\'),
            },
            (Some(_), _) => cur.push(b),
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b',') => args.push(into_string(std::mem::take(&mut cur))),
            (None, b')') => {
                args.push(into_string(cur));
                return Ok((args, pos));
            }
            (None, _) => cur.push(b),
        }
    }
    if quote.is_some() {
        Err("unterminated quote in arguments".to_string())
    } else {
        Err("expected ')'".to_string())
    }
}

/// The argument bytes as text. They come from a `&str` split at ASCII bytes with ASCII
/// escapes replaced, so they are valid UTF-8; a lossy conversion keeps this panic-free.
fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Argument `index` (0-based) as text, if present.
pub(crate) fn str_arg(args: &[String], index: usize) -> Option<&str> {
    args.get(index).map(String::as_str)
}

/// Argument `index` as an integer; `Ok(None)` if absent (or empty, which HAProxy treats as
/// absent for optional integers), an error naming its 1-based position otherwise.
pub(crate) fn int_arg(args: &[String], index: usize) -> Result<Option<i64>, String> {
    match args.get(index).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(text) => parse_int_exact(text)
            .map(Some)
            .ok_or_else(|| bad_arg(text, "integer", index)),
    }
}

/// The message for argument `index` (0-based) that is not of type `ty`.
pub(crate) fn bad_arg(text: &str, ty: &str, index: usize) -> String {
    format!(
        "failed to parse '{text}' as type '{ty}' at position {}",
        index + 1
    )
}

/// True for a valid variable name `scope.name` (configuration.txt §2.8): the scope is one of
/// `proc`, `sess`, `txn`, `req`, `res`, `check`, and the name is made of letters, digits, `_`
/// and `.`.
pub(crate) fn is_var_name(text: &str) -> bool {
    let Some((scope, name)) = text.split_once('.') else {
        return false;
    };
    matches!(scope, "proc" | "sess" | "txn" | "req" | "res" | "check")
        && !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// Checks a variable name argument.
pub(crate) fn var_arg(text: &str, index: usize) -> Result<String, String> {
    if is_var_name(text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "invalid variable name '{text}' at position {} (expected proc., sess., txn., req., res. or check. followed by a name)",
            index + 1
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<Option<Vec<String>>> {
        split_chain(text)
            .unwrap()
            .into_iter()
            .map(|c| c.args)
            .collect()
    }

    fn one(text: &str) -> Vec<String> {
        split_chain(text).unwrap()[0].args.clone().unwrap()
    }

    #[test]
    fn keywords_and_arguments() {
        let calls = split_chain("req.hdr(host,1),lower,map_beg(/x.map,def)").unwrap();
        let names: Vec<_> = calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["req.hdr", "lower", "map_beg"]);
        assert_eq!(calls[0].args.as_deref().unwrap(), ["host", "1"]);
        assert_eq!(calls[1].args, None);
        assert_eq!(args("str()"), [Some(vec![String::new()])]);
        assert_eq!(one("concat(1,,2)"), ["1", "", "2"]);
        assert_eq!(one("str( a )"), [" a "]);
    }

    #[test]
    fn quotes_and_escapes() {
        // The manual's example: the regex keeps its parenthesis and alternation.
        assert_eq!(
            one(r#"regsub("(foo|bar)",blah,g)"#),
            ["(foo|bar)", "blah", "g"]
        );
        assert_eq!(
            one(r#"regsub("^/(here)(/|$)","my/\1",g)"#),
            ["^/(here)(/|$)", r"my/\1", "g"]
        );
        assert_eq!(one(r#"str("a,b)")"#), ["a,b)"]);
        assert_eq!(one("str('a\\b')"), ["a\\b"]);
        assert_eq!(one(r#"str('a\"b')"#), [r#"a\"b"#]);
        assert_eq!(one(r#"str("a'b")"#), ["a'b"]);
        assert_eq!(one(r#"str(x"y,z"w)"#), ["xy,zw"]);
        assert_eq!(one(r"str(x\\y)"), [r"x\y"]);
        assert_eq!(one(r"str(x\ny\tz\r)"), ["x\ny\tz\r"]);
        assert_eq!(one(r#"str(a\"b\ c\'d)"#), [r#"a"b c'd"#]);
        assert_eq!(one(r"str(a\qb\x41\#)"), [r"a\qb\x41\#"]);
        // A backslash does not protect a comma (HAProxy behaves the same).
        assert_eq!(one(r"concat(a\,b)"), [r"a\", "b"]);
    }

    #[test]
    fn errors() {
        assert_eq!(split_chain("").unwrap_err(), "missing fetch method");
        assert_eq!(
            split_chain("path,").unwrap_err(),
            "missing converter after ','"
        );
        assert_eq!(
            split_chain("path,,lower").unwrap_err(),
            "missing converter after ','"
        );
        assert_eq!(
            split_chain(r"str(a\)b)").unwrap_err(),
            "missing comma after fetch keyword 'str'"
        );
        assert_eq!(
            split_chain("path,regsub(a,b)x").unwrap_err(),
            "missing comma after converter 'regsub'"
        );
        assert_eq!(
            split_chain("str(abc").unwrap_err(),
            "fetch method 'str' : expected ')'"
        );
        assert_eq!(
            split_chain("path,regsub('abc,d)").unwrap_err(),
            "converter 'regsub' : unterminated quote in arguments"
        );
    }

    #[test]
    fn typed_arguments() {
        let a = vec!["12".to_string(), "x".to_string(), String::new()];
        assert_eq!(int_arg(&a, 0), Ok(Some(12)));
        assert_eq!(
            int_arg(&a, 1),
            Err("failed to parse 'x' as type 'integer' at position 2".to_string())
        );
        assert_eq!(int_arg(&a, 2), Ok(None));
        assert_eq!(int_arg(&a, 3), Ok(None));
        assert!(is_var_name("txn.foo"));
        assert!(is_var_name("req.a.b_1"));
        assert!(!is_var_name("foo.bar"));
        assert!(!is_var_name("txn."));
        assert!(!is_var_name("txn.a-b"));
    }
}
