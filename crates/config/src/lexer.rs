//! Splits one configuration line into words, the way HAProxy does (manual §2.2 and §2.3).
//!
//! This is the first thing that happens to every line after [`crate::reader`] has read the
//! file: [`crate::preprocess`] calls [`split_line`] on each line, then looks at the words to
//! apply `.if` blocks. Words are separated by unprotected spaces and tabs, an unprotected `#`
//! starts a comment, backslashes escape outside single quotes, double quotes protect separators
//! but still expand `"$VAR"`/`"${VAR-default}"`/`"${VAR[*]}"`, and single quotes protect
//! everything. Quoted and unquoted pieces that touch form a single word. The environment is not
//! read here: the caller passes a `lookup` closure, which keeps this crate pure and lets the
//! preprocessor answer the pseudo-variables `.FILE`, `.LINE` and `.SECTION`.
//!
//! Read [`split_line`] first; [`LexError`] lists everything that can go wrong.

use std::fmt;

/// Why a line could not be split into words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexError {
    /// A `"` or `'` was opened and the line ended before it was closed.
    UnterminatedQuote {
        /// The quote character that was left open.
        quote: char,
    },
    /// `\x` was not followed by two hexadecimal digits.
    BadEscape,
    /// `\x00`: a NUL character would cut the word short in every consumer, so it is refused.
    NulCharacter,
    /// `\xNN` escapes produced bytes that do not form valid UTF-8 text.
    InvalidUtf8,
    /// A `$` inside double quotes is not followed by a variable name.
    BadVariable,
    /// `${` was not closed by a `}` on the same quoted piece.
    UnterminatedBrace,
    /// `[` after a braced variable name was not the `[*]` word-expansion marker.
    BadWordExpansion,
    /// A name starting with `.` that the lookup does not know (only `.FILE`, `.LINE` and
    /// `.SECTION` exist, §2.3).
    UnknownPseudoVariable(String),
    /// The line ends with a backslash; HAProxy has no line continuation.
    TrailingBackslash,
}

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LexError::UnterminatedQuote { quote } => {
                let kind = if *quote == '\'' { "single" } else { "double" };
                write!(f, "unterminated {kind} quote")
            }
            LexError::BadEscape => {
                f.write_str("invalid \\x escape: two hexadecimal digits must follow \\x")
            }
            LexError::NulCharacter => f.write_str("\\x00 is not allowed in a word"),
            LexError::InvalidUtf8 => {
                f.write_str("\\x escapes produce text that is not valid UTF-8")
            }
            LexError::BadVariable => {
                f.write_str("'$' must be followed by a variable name (write \\$ for a dollar sign)")
            }
            LexError::UnterminatedBrace => f.write_str("missing '}' to close '${'"),
            LexError::BadWordExpansion => {
                f.write_str("only '[*]' may follow a variable name inside '${...}'")
            }
            LexError::UnknownPseudoVariable(name) => write!(f, "unknown pseudo-variable '{name}'"),
            LexError::TrailingBackslash => {
                f.write_str("backslash at end of line (there is no line continuation)")
            }
        }
    }
}

impl std::error::Error for LexError {}

/// Splits `line` into words, resolving quotes, escapes and variables (§2.2, §2.3).
///
/// `lookup` answers variable names (environment variables and the `.FILE`/`.LINE`/`.SECTION`
/// pseudo-variables); `None` means "not set". Rules, in short:
///
/// - spaces and tabs separate words unless escaped or quoted; an unquoted `#` ends the line;
/// - outside single quotes, `\ ` `\<TAB>` `\#` `\\` `\'` `\"` `\$` give the character itself,
///   `\n` `\r` `\t` `\xNN` give the byte, and any other `\c` is kept as the two characters
///   `\c` (so regular expressions like `\.` or `\d` survive unquoted, as in HAProxy);
/// - `"..."` protects spaces, `'` and `#`, and expands `$NAME`, `${NAME}`, `${NAME-default}`
///   (default only when NAME is unset, not when it is empty) and `${NAME[*]}` (the value's
///   space-separated fields become separate words); an unset variable expands to nothing;
/// - `'...'` protects everything; nothing inside is interpreted;
/// - variables are not expanded outside double quotes;
/// - pieces that touch form one word (`"a"'b'c` is `abc`); a quoted empty piece makes an empty
///   word (`""` is kept), except `"${V[*]}"` with an empty V, which yields no word at all, like
///   `"$@"` in a shell.
///
/// A single trailing `\r` (CRLF files) is ignored. A backslash at the very end of the line is an
/// error: HAProxy has no line continuation.
pub fn split_line(
    line: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, LexError> {
    split_line_partial(line, lookup).map_err(|(err, _)| err)
}

/// Like [`split_line`], but on error also returns the words completed before the error, so the
/// caller can name the keyword of a broken line in its diagnostic.
pub fn split_line_partial(
    line: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, (LexError, Vec<String>)> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut lexer = Lexer {
        bytes: line.as_bytes(),
        pos: 0,
        lookup,
        words: Vec::new(),
        word: Vec::new(),
        keep_empty: false,
    };
    match lexer.run() {
        Ok(()) => Ok(lexer.words),
        Err(err) => Err((err, lexer.words)),
    }
}

/// The state of one `split_line` call. Works on bytes: every character with a meaning is ASCII,
/// so the bytes of multi-byte UTF-8 characters are copied through untouched.
struct Lexer<'a> {
    bytes: &'a [u8],
    pos: usize,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    /// Words finished so far.
    words: Vec<String>,
    /// The word being built, as bytes because `\xNN` may produce partial UTF-8 sequences that
    /// only become valid once the following escapes are added.
    word: Vec<u8>,
    /// True once the current word contains a quoted piece, which makes it a word even if empty.
    keep_empty: bool,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// The whole line: a sequence of unquoted characters, quoted pieces and separators.
    fn run(&mut self) -> Result<(), LexError> {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' => {
                    self.pos += 1;
                    self.finish_word()?;
                }
                // An unquoted '#' starts a comment, even in the middle of a word.
                b'#' => break,
                b'\\' => {
                    let byte = self.escape()?;
                    self.word.push(byte);
                }
                b'"' => {
                    self.pos += 1;
                    self.double_quoted()?;
                }
                b'\'' => {
                    self.pos += 1;
                    self.single_quoted()?;
                }
                _ => {
                    self.word.push(b);
                    self.pos += 1;
                }
            }
        }
        self.finish_word()
    }

    /// Ends the current word at a separator; empty words are only kept when quoted.
    fn finish_word(&mut self) -> Result<(), LexError> {
        if !self.word.is_empty() || self.keep_empty {
            let bytes = std::mem::take(&mut self.word);
            let word = String::from_utf8(bytes).map_err(|_| LexError::InvalidUtf8)?;
            self.words.push(word);
        }
        self.keep_empty = false;
        Ok(())
    }

    /// Decodes the backslash sequence at `pos` and returns the byte it stands for (§2.2). The
    /// same sequences are recognised unquoted and inside double quotes (the §2.2 table).
    ///
    /// Unknown sequences give back the backslash alone and leave the next character to be read
    /// normally, which keeps `\1` or `\.` intact for regular expressions, as HAProxy does.
    fn escape(&mut self) -> Result<u8, LexError> {
        let Some(&next) = self.bytes.get(self.pos + 1) else {
            return Err(LexError::TrailingBackslash);
        };
        let out = match next {
            b' ' | b'\t' | b'\\' | b'#' | b'\'' | b'"' | b'$' => next,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'x' => {
                let hi = self.bytes.get(self.pos + 2).and_then(|&b| hex_value(b));
                let lo = self.bytes.get(self.pos + 3).and_then(|&b| hex_value(b));
                let (Some(hi), Some(lo)) = (hi, lo) else {
                    return Err(LexError::BadEscape);
                };
                let byte = (hi << 4) | lo;
                if byte == 0 {
                    return Err(LexError::NulCharacter);
                }
                self.pos += 4;
                return Ok(byte);
            }
            _ => {
                self.pos += 1;
                return Ok(b'\\');
            }
        };
        self.pos += 2;
        Ok(out)
    }

    /// Weak quoting: escapes and variables are interpreted, separators and `'`/`#` are not.
    /// Called with `pos` just after the opening quote.
    fn double_quoted(&mut self) -> Result<(), LexError> {
        // A piece made only of `${V[*]}` expansions that produced nothing must not create an
        // empty word, so remember whether this piece expanded a list.
        let mut expanded_list = false;
        loop {
            let Some(b) = self.peek() else {
                return Err(LexError::UnterminatedQuote { quote: '"' });
            };
            match b {
                b'"' => {
                    self.pos += 1;
                    if !expanded_list {
                        self.keep_empty = true;
                    }
                    return Ok(());
                }
                b'\\' => {
                    let byte = self.escape()?;
                    self.word.push(byte);
                }
                b'$' => {
                    self.pos += 1;
                    expanded_list |= self.variable()?;
                }
                _ => {
                    self.word.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    /// Strong quoting: everything up to the next `'` is taken literally.
    fn single_quoted(&mut self) -> Result<(), LexError> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let Some(len) = rest.iter().position(|&b| b == b'\'') else {
            return Err(LexError::UnterminatedQuote { quote: '\'' });
        };
        self.word.extend_from_slice(&rest[..len]);
        self.pos += len + 1;
        self.keep_empty = true;
        Ok(())
    }

    /// Expands a variable reference; `pos` is just after the `$`. Returns true if it was a
    /// `${NAME[*]}` list expansion (§2.3).
    fn variable(&mut self) -> Result<bool, LexError> {
        let braced = self.peek() == Some(b'{');
        if braced {
            self.pos += 1;
        }
        let name = self.variable_name()?;
        let mut list = false;
        let mut default: Option<String> = None;
        if braced {
            if self.peek() == Some(b'[') {
                if self.bytes.get(self.pos..self.pos + 3) != Some(b"[*]".as_slice()) {
                    return Err(LexError::BadWordExpansion);
                }
                list = true;
                self.pos += 3;
            }
            match self.peek() {
                Some(b'}') => self.pos += 1,
                Some(b'-') => {
                    // The default runs raw up to the closing brace. It may not cross the closing
                    // double quote: a brace left open there is almost certainly a typo.
                    let start = self.pos + 1;
                    let rest = self.bytes.get(start..).unwrap_or_default();
                    let Some(len) = rest.iter().position(|&b| b == b'}' || b == b'"') else {
                        return Err(LexError::UnterminatedBrace);
                    };
                    if rest[len] != b'}' {
                        return Err(LexError::UnterminatedBrace);
                    }
                    let text = String::from_utf8_lossy(&rest[..len]).into_owned();
                    default = Some(text);
                    self.pos = start + len + 1;
                }
                _ => return Err(LexError::UnterminatedBrace),
            }
        }
        let value = match (self.lookup)(&name) {
            Some(value) => value,
            None if name.starts_with('.') => return Err(LexError::UnknownPseudoVariable(name)),
            None => default.unwrap_or_default(),
        };
        if list {
            self.expand_list(&value)?;
        } else {
            self.word.extend_from_slice(value.as_bytes());
        }
        Ok(list)
    }

    /// Reads a variable name: a letter or `_` then letters, digits and `_`, or a `.` followed by
    /// those for the pseudo-variables (the only names allowed to contain a dot, §2.3).
    fn variable_name(&mut self) -> Result<String, LexError> {
        let start = self.pos;
        match self.peek() {
            Some(b'.') => self.pos += 1,
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
            _ => return Err(LexError::BadVariable),
        }
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            self.pos += 1;
        }
        let name = self.bytes.get(start..self.pos).unwrap_or_default();
        // Only ASCII was accepted above, so this conversion is exact.
        Ok(String::from_utf8_lossy(name).into_owned())
    }

    /// `${NAME[*]}`: the first field of the value joins the current word, each following field
    /// starts a new word. Runs of whitespace separate fields; leading and trailing whitespace
    /// does not create empty words.
    fn expand_list(&mut self, value: &str) -> Result<(), LexError> {
        for (i, field) in value.split_ascii_whitespace().enumerate() {
            if i > 0 {
                self.finish_word()?;
            }
            self.word.extend_from_slice(field.as_bytes());
        }
        Ok(())
    }
}

/// The value of one hexadecimal digit.
fn hex_value(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("example.org".into()),
            "EMPTY" => Some(String::new()),
            "LIST" => Some("a  b\tc".into()),
            "PADDED" => Some("  x y  ".into()),
            "SPACES" => Some("   ".into()),
            "FD" => Some("3".into()),
            ".LINE" => Some("42".into()),
            ".FILE" => Some("t.cfg".into()),
            ".SECTION" => Some("fe".into()),
            _ => None,
        }
    }

    fn split(line: &str) -> Vec<String> {
        split_line(line, &env).unwrap()
    }

    fn fails(line: &str) -> LexError {
        split_line(line, &env).unwrap_err()
    }

    #[test]
    fn splits_on_spaces_and_tabs() {
        assert_eq!(split("  bind\t:80   ssl "), ["bind", ":80", "ssl"]);
        assert!(split("").is_empty());
        assert!(split(" \t ").is_empty());
    }

    #[test]
    fn comments() {
        assert_eq!(split("mode http # the mode"), ["mode", "http"]);
        assert_eq!(split("foo#bar baz"), ["foo"]);
        assert!(split("# only a comment").is_empty());
        assert_eq!(split(r##"a "#b" '#c' \#d"##), ["a", "#b", "#c", "#d"]);
    }

    #[test]
    fn escapes_outside_quotes() {
        assert_eq!(split(r"a\ b"), ["a b"]);
        assert_eq!(split("a\\\tb"), ["a\tb"]);
        assert_eq!(split(r"\#"), ["#"]);
        assert_eq!(split(r"\\"), ["\\"]);
        assert_eq!(split(r"\'"), ["'"]);
        assert_eq!(split(r#"\""#), ["\""]);
        assert_eq!(split(r"\$"), ["$"]);
        assert_eq!(split(r"\n\r\t"), ["\n\r\t"]);
        assert_eq!(split(r"\x41\x0a\x5C"), ["A\n\\"]);
        assert_eq!(split(r"\x20"), [" "]);
    }

    #[test]
    fn unknown_escapes_keep_the_backslash() {
        assert_eq!(split(r"^/foo\.bar$ \1\ \2"), [r"^/foo\.bar$", r"\1 \2"]);
        assert_eq!(split(r"\d"), [r"\d"]);
    }

    #[test]
    fn hex_escapes_build_utf8() {
        assert_eq!(split(r"\xc3\xa9"), ["é"]);
        assert_eq!(fails(r"\xc3"), LexError::InvalidUtf8);
        assert_eq!(
            fails(r"\xff").to_string(),
            "\\x escapes produce text that is not valid UTF-8"
        );
        assert_eq!(split("héllo wörld"), ["héllo", "wörld"]);
    }

    #[test]
    fn bad_hex_escapes() {
        assert_eq!(fails(r"\x4"), LexError::BadEscape);
        assert_eq!(fails(r"\xZZ"), LexError::BadEscape);
        assert_eq!(fails(r"\x"), LexError::BadEscape);
        assert_eq!(fails(r"\x00"), LexError::NulCharacter);
        assert_eq!(
            fails(r"\xg1").to_string(),
            "invalid \\x escape: two hexadecimal digits must follow \\x"
        );
        assert_eq!(fails(r"\x00").to_string(), "\\x00 is not allowed in a word");
    }

    #[test]
    fn escapes_inside_double_quotes() {
        assert_eq!(split(r#""a\"b\\c\$d\#e\'f\ g""#), [r#"a"b\c$d#e'f g"#]);
        assert_eq!(split(r#""\n\x41\t""#), ["\nA\t"]);
        assert_eq!(split(r#""\1""#), [r"\1"]);
    }

    #[test]
    fn double_quotes_protect_separators() {
        assert_eq!(
            split(r#"log-format "%t %s 'x' #y""#),
            ["log-format", "%t %s 'x' #y"]
        );
    }

    #[test]
    fn single_quotes_protect_everything() {
        assert_eq!(
            split(r#"'a b\n $HOST "${HOST}" #c'"#),
            [r#"a b\n $HOST "${HOST}" #c"#]
        );
        assert_eq!(split(r"'\'"), [r"\"]);
    }

    #[test]
    fn quoted_pieces_glue_to_text() {
        assert_eq!(split(r#""a"'b'c"#), ["abc"]);
        assert_eq!(split(r#"x"y z"w"#), ["xy zw"]);
        assert_eq!(
            split(r#""%{+Q}o %t"' %s'\ %{-Q}r"#),
            ["%{+Q}o %t %s %{-Q}r"]
        );
    }

    #[test]
    fn empty_quotes_make_empty_words() {
        assert_eq!(split(r#""""#), [""]);
        assert_eq!(split(r#"a "" b ''"#), ["a", "", "b", ""]);
        assert_eq!(split(r#"a"""#), ["a"]);
    }

    #[test]
    fn variables_in_double_quotes() {
        assert_eq!(split(r#""$HOST""#), ["example.org"]);
        assert_eq!(split(r#""${HOST}:80""#), ["example.org:80"]);
        assert_eq!(split(r#""$HOST:80""#), ["example.org:80"]);
        assert_eq!(split(r#""fd@${FD}""#), ["fd@3"]);
        assert_eq!(split(r#""$HOST.x""#), ["example.org.x"]);
        assert_eq!(split(r#""\$HOST""#), ["$HOST"]);
    }

    #[test]
    fn variables_are_not_expanded_outside_double_quotes() {
        assert_eq!(split("$HOST ${HOST}"), ["$HOST", "${HOST}"]);
        assert_eq!(split("'$HOST'"), ["$HOST"]);
        assert_eq!(split("^/a$"), ["^/a$"]);
    }

    #[test]
    fn unset_variable_is_empty() {
        assert_eq!(split(r#""$NOPE""#), [""]);
        assert_eq!(split(r#"a"${NOPE}"b"#), ["ab"]);
    }

    #[test]
    fn defaults_apply_only_when_unset() {
        assert_eq!(split(r#""${NOPE-127.0.0.1}:514""#), ["127.0.0.1:514"]);
        assert_eq!(split(r#""${HOST-127.0.0.1}""#), ["example.org"]);
        assert_eq!(split(r#""${EMPTY-default}""#), [""]);
        assert_eq!(split(r#""${NOPE-}""#), [""]);
        // The default is raw text: no escapes or variables inside it.
        assert_eq!(split(r#""${NOPE-a b\n$HOST}""#), [r"a b\n$HOST"]);
    }

    #[test]
    fn list_expansion() {
        assert_eq!(split(r#"x "${LIST[*]}" y"#), ["x", "a", "b", "c", "y"]);
        assert_eq!(split(r#""<${LIST[*]}>""#), ["<a", "b", "c>"]);
        assert_eq!(split(r#""${PADDED[*]}""#), ["x", "y"]);
        assert_eq!(split(r#"a "${SPACES[*]}" b"#), ["a", "b"]);
        assert_eq!(split(r#"a "${EMPTY[*]}" b"#), ["a", "b"]);
        assert_eq!(split(r#"a "${NOPE[*]}""#), ["a"]);
        assert_eq!(split(r#""${NOPE[*]-p q}""#), ["p", "q"]);
        // Without braces, [*] is plain text; without [*], spaces stay inside the word.
        assert_eq!(split(r#""$LIST[*]""#), ["a  b\tc[*]"]);
        assert_eq!(split(r#""${LIST}""#), ["a  b\tc"]);
        // A list expansion beside other quoted text keeps that text's word.
        assert_eq!(split(r#""${NOPE[*]}"''"#), [""]);
    }

    #[test]
    fn pseudo_variables() {
        assert_eq!(
            split(r#""${.FILE}:$.LINE" "$.SECTION""#),
            ["t.cfg:42", "fe"]
        );
        assert_eq!(
            fails(r#""${.NOPE}""#),
            LexError::UnknownPseudoVariable(".NOPE".into())
        );
        assert_eq!(fails(r#""$.""#).to_string(), "unknown pseudo-variable '.'");
    }

    #[test]
    fn malformed_variables() {
        assert_eq!(fails(r#""$""#), LexError::BadVariable);
        assert_eq!(fails(r#""$1""#), LexError::BadVariable);
        assert_eq!(fails(r#""${}""#), LexError::BadVariable);
        assert_eq!(fails(r#""a $ b""#), LexError::BadVariable);
        assert_eq!(fails(r#""${HOST""#), LexError::UnterminatedBrace);
        assert_eq!(fails(r#""${HOST x}""#), LexError::UnterminatedBrace);
        assert_eq!(fails(r#""${NOPE-abc"}"#), LexError::UnterminatedBrace);
        assert_eq!(fails(r#""${NOPE-abc"#), LexError::UnterminatedBrace);
        assert_eq!(fails(r#""${LIST[x]}""#), LexError::BadWordExpansion);
        assert_eq!(fails(r#""${LIST[*""#), LexError::BadWordExpansion);
        assert_eq!(
            fails(r#""$""#).to_string(),
            "'$' must be followed by a variable name (write \\$ for a dollar sign)"
        );
        assert_eq!(fails(r#""${A""#).to_string(), "missing '}' to close '${'");
        assert_eq!(
            fails(r#""${A[1]}""#).to_string(),
            "only '[*]' may follow a variable name inside '${...}'"
        );
    }

    #[test]
    fn unterminated_quotes() {
        assert_eq!(
            fails(r#"a "b c"#),
            LexError::UnterminatedQuote { quote: '"' }
        );
        assert_eq!(fails("a 'b c"), LexError::UnterminatedQuote { quote: '\'' });
        assert_eq!(fails(r#"a "b"#).to_string(), "unterminated double quote");
        assert_eq!(fails("'").to_string(), "unterminated single quote");
        // A '#' inside an open quote is not a comment, so the quote is still open.
        assert_eq!(
            fails(r#""a # b"#),
            LexError::UnterminatedQuote { quote: '"' }
        );
    }

    #[test]
    fn trailing_backslash() {
        assert_eq!(fails("bind :80 \\"), LexError::TrailingBackslash);
        assert_eq!(fails("\"a\\"), LexError::TrailingBackslash);
        assert_eq!(
            fails("a\\").to_string(),
            "backslash at end of line (there is no line continuation)"
        );
        // Inside single quotes a backslash is literal.
        assert_eq!(split(r"'a\'"), [r"a\"]);
        // An escaped backslash at the end is fine.
        assert_eq!(split(r"a\\"), [r"a\"]);
    }

    #[test]
    fn crlf_is_stripped() {
        assert_eq!(split("mode http\r"), ["mode", "http"]);
        // The backslash before a stripped CR is at the end of the line.
        assert_eq!(fails("a\\\r"), LexError::TrailingBackslash);
        assert_eq!(split("x\r\n"), ["x"]);
        assert_eq!(split("'a\rb'"), ["a\rb"]);
    }

    #[test]
    fn partial_words_on_error() {
        let (err, words) = split_line_partial(r#"bind "oops"#, &env).unwrap_err();
        assert_eq!(err, LexError::UnterminatedQuote { quote: '"' });
        assert_eq!(words, ["bind"]);
    }

    #[test]
    fn never_panics_on_odd_input() {
        for line in [
            "\\", "\"", "'", "\"$", "\"${", "\"${A", "\"${A-", "\"${A[", "\"${A[*", "\\x", "\\x1",
            "#", "\"\\", "\u{0}", "é\\xé",
        ] {
            let _ = split_line(line, &env);
        }
    }
}
