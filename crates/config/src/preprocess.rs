//! Turns a whole file into lexed lines, applying the conditional blocks and message directives
//! of the manual's §2.4.
//!
//! This sits between [`crate::reader`] (which provides each file's text) and
//! [`crate::sections`] (which groups the resulting lines into sections). Every line is split
//! with [`crate::lexer::split_line`]; the pseudo-variables `.FILE`, `.LINE` and `.SECTION` are
//! answered here and everything else goes to the environment of the [`CondContext`], as the
//! `global` sections' `setenv`, `presetenv`, `unsetenv` and `resetenv` lines met so far
//! changed it ([`EnvChanges`]). Lines whose
//! first word is `.if`, `.elif`, `.else` or `.endif` drive a stack of nested blocks; lines in a
//! false branch are dropped; `.diag`, `.notice`, `.warning` and `.alert` become diagnostics.
//! Problems are pushed as alerts and processing goes on, so one run reports them all.
//!
//! Read [`preprocess`] first.

use crate::cond::{self, CondContext};
use crate::diag::{Diagnostic, Diagnostics, Severity, Span};
use crate::environment::EnvChanges;
use crate::lexer;
use std::sync::Arc;

/// One line that survived preprocessing: where it is and its words (never empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// File and line number, for diagnostics.
    pub span: Span,
    /// The words as the lexer produced them; the first one is the keyword.
    pub words: Vec<String>,
}

/// Lexes `text` (the contents of `file`) and applies the conditional blocks (§2.4).
///
/// Returns the lines of live branches that have at least one word. Every problem is pushed to
/// `diags` as an alert with the line's span and processing continues:
///
/// - lexer errors, keyword = the first word completed before the error, or `lexer`. They are
///   reported in false branches too, as HAProxy does: the line must be lexed to know whether it
///   is a directive, and a broken line is broken whatever the condition;
/// - condition errors on `.if`/`.elif` (the block is then treated as false in all its branches,
///   so a typo never switches on an `.else`);
/// - `.elif`/`.else`/`.endif` without `.if`, `.elif` after `.else`, a second `.else`, arguments
///   after `.else`/`.endif`, and every `.if` left open at the end of the file (reported at the
///   `.if`);
/// - any other line starting with `.` in a live branch ("unknown directive").
///
/// Conditions in false branches are not evaluated, but `.if`/`.endif` still nest there.
/// `.diag`, `.notice`, `.warning` and `.alert` in live branches push a diagnostic of that
/// severity whose message is the words after the directive joined with spaces.
///
/// `env` holds the environment changes of the files read before (it is updated with this
/// one's).
pub fn preprocess(
    file: &Arc<str>,
    text: &str,
    (ctx, env): (&CondContext, &mut EnvChanges),
    diags: &mut Diagnostics,
) -> Vec<Line> {
    let mut state = State {
        ctx,
        env,
        diags,
        blocks: Vec::new(),
        section: String::new(),
        in_global: false,
        lines: Vec::new(),
    };
    for (index, raw) in text.split('\n').enumerate() {
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let span = Span::new(file, number);
        state.line(file, &span, raw);
    }
    for block in std::mem::take(&mut state.blocks) {
        state
            .diags
            .push(Diagnostic::alert(&block.opened_at, ".if", "missing .endif"));
    }
    state.lines
}

/// One open `.if` block.
#[derive(Debug)]
struct Block {
    /// Where the `.if` is, to report a missing `.endif`.
    opened_at: Span,
    /// True if the lines around the block are live; a block in a dead branch stays dead.
    parent_live: bool,
    /// True once a branch was chosen (or the block must stay dead), so later branches are not.
    taken: bool,
    /// True if the current branch's lines are kept.
    live: bool,
    /// True after `.else`.
    seen_else: bool,
}

/// The preprocessor's state while going through one file.
struct State<'c, 'd> {
    ctx: &'c CondContext<'c>,
    /// The environment changes so far.
    env: &'d mut EnvChanges,
    diags: &'d mut Diagnostics,
    blocks: Vec<Block>,
    /// Name of the current section, or its type if unnamed, for `.SECTION`.
    section: String,
    /// The current section is a `global` one (where the environment may change).
    in_global: bool,
    lines: Vec<Line>,
}

impl State<'_, '_> {
    /// True if the current line belongs to a live branch.
    fn live(&self) -> bool {
        self.blocks.last().is_none_or(|b| b.live)
    }

    /// Handles one raw line of the file.
    fn line(&mut self, file: &Arc<str>, span: &Span, raw: &str) {
        let words = {
            let section = self.section.as_str();
            let (base, env) = (self.ctx.lookup, &*self.env);
            let line_number = span.line.to_string();
            let lookup = |name: &str| match name {
                ".FILE" => Some(file.to_string()),
                ".LINE" => Some(line_number.clone()),
                ".SECTION" => Some(section.to_string()),
                _ => env.lookup(name, base),
            };
            lexer::split_line_partial(raw, &lookup)
        };
        let words = match words {
            Ok(words) => words,
            Err((err, partial)) => {
                let keyword = partial.first().map_or("lexer", String::as_str);
                self.diags
                    .push(Diagnostic::alert(span, keyword, err.to_string()));
                self.broken_directive(span, keyword);
                return;
            }
        };
        let Some(first) = words.first() else {
            return;
        };
        if first.starts_with('.') {
            self.directive(span, &words);
            return;
        }
        if !self.live() {
            return;
        }
        // `.SECTION` follows the section keywords, implemented or not (§2.3).
        if crate::sections::is_section_keyword(first) {
            self.section = words.get(1).unwrap_or(first).clone();
            self.in_global = first == "global";
        } else if self.in_global {
            // The next line sees the change at once (the parser checks the arguments).
            self.env.apply(&words, self.ctx.lookup);
        }
        // Addresses expand bare `$NAME`s too, with the environment as this line sees it.
        let mut words = words;
        if let Some(index) = crate::addr::address_word(&words)
            && words[index].contains('$')
        {
            let (base, env) = (self.ctx.lookup, &*self.env);
            words[index] = crate::addr::expand_env(&words[index], &|name| env.lookup(name, base));
        }
        self.lines.push(Line {
            span: span.clone(),
            words,
        });
    }

    /// Keeps the block structure right when an `.if` or `.elif` line could not be lexed: the
    /// block is opened (or continued) as if its condition were in error, so the matching
    /// `.endif` does not cause a second, misleading alert.
    fn broken_directive(&mut self, span: &Span, keyword: &str) {
        match keyword {
            ".if" => self.blocks.push(Block {
                opened_at: span.clone(),
                parent_live: self.live(),
                taken: true,
                live: false,
                seen_else: false,
            }),
            ".elif" => {
                if let Some(block) = self.blocks.last_mut() {
                    block.live = false;
                    block.taken = true;
                }
            }
            _ => {}
        }
    }

    /// Handles a line whose first word starts with a dot. `words` is never empty.
    fn directive(&mut self, span: &Span, words: &[String]) {
        let name = words.first().map_or("", String::as_str);
        let args = words.get(1..).unwrap_or_default();
        match name {
            ".if" => self.if_(span, args),
            ".elif" => self.elif(span, args),
            ".else" => {
                self.no_args(span, name, args);
                self.else_(span);
            }
            ".endif" => {
                self.no_args(span, name, args);
                if self.blocks.pop().is_none() {
                    self.alert(span, name, "no .if block is open");
                }
            }
            _ if !self.live() => {}
            ".diag" => self.message(span, name, args, Severity::Diag),
            ".notice" => self.message(span, name, args, Severity::Notice),
            ".warning" => self.message(span, name, args, Severity::Warning),
            ".alert" => self.message(span, name, args, Severity::Alert),
            _ => self.alert(span, name, "unknown directive"),
        }
    }

    /// `.if <condition>`: opens a block; the condition is only evaluated in a live branch.
    fn if_(&mut self, span: &Span, args: &[String]) {
        let parent_live = self.live();
        // A dead parent, a true condition or a condition error all mean that no later branch
        // of this block may be chosen.
        let (live, taken) = if parent_live {
            match self.condition(span, ".if", args) {
                Some(result) => (result, result),
                None => (false, true),
            }
        } else {
            (false, true)
        };
        self.blocks.push(Block {
            opened_at: span.clone(),
            parent_live,
            taken,
            live,
            seen_else: false,
        });
    }

    /// `.elif <condition>`: evaluated only if the block is live and no branch was taken yet.
    fn elif(&mut self, span: &Span, args: &[String]) {
        let Some(block) = self.blocks.last() else {
            self.alert(span, ".elif", "no .if block is open");
            return;
        };
        if block.seen_else {
            self.alert(span, ".elif", "not allowed after .else");
            return;
        }
        let (live, taken) = if block.parent_live && !block.taken {
            match self.condition(span, ".elif", args) {
                Some(result) => (result, result),
                None => (false, true),
            }
        } else {
            (false, true)
        };
        if let Some(block) = self.blocks.last_mut() {
            block.live = live;
            block.taken = taken;
        }
    }

    /// `.else`: live if the block is and no earlier branch was taken.
    fn else_(&mut self, span: &Span) {
        let Some(block) = self.blocks.last_mut() else {
            self.alert(span, ".else", "no .if block is open");
            return;
        };
        if block.seen_else {
            self.alert(span, ".else", "this block already has an .else");
            return;
        }
        block.seen_else = true;
        block.live = block.parent_live && !block.taken;
        block.taken = true;
    }

    /// Evaluates a condition (the words joined with single spaces, as §2.4 describes); on error
    /// reports it and returns `None`.
    fn condition(&mut self, span: &Span, directive: &str, args: &[String]) -> Option<bool> {
        let (base, env) = (self.ctx.lookup, &*self.env);
        let lookup = |name: &str| env.lookup(name, base);
        let ctx = CondContext {
            lookup: &lookup,
            ..*self.ctx
        };
        match cond::eval(&args.join(" "), &ctx) {
            Ok(result) => Some(result),
            Err(err) => {
                self.alert(span, directive, err.to_string());
                None
            }
        }
    }

    /// `.else` and `.endif` take no arguments; extra words are reported, the directive still
    /// applies.
    fn no_args(&mut self, span: &Span, directive: &str, args: &[String]) {
        if let Some(first) = args.first() {
            self.alert(span, directive, format!("unexpected argument '{first}'"));
        }
    }

    /// `.diag`/`.notice`/`.warning`/`.alert "message"`.
    fn message(&mut self, span: &Span, directive: &str, args: &[String], severity: Severity) {
        self.diags.push(Diagnostic {
            severity,
            span: Some(span.clone()),
            keyword: Some(directive.to_string()),
            message: args.join(" "),
        });
    }

    fn alert(&mut self, span: &Span, keyword: &str, message: impl Into<String>) {
        self.diags.push(Diagnostic::alert(span, keyword, message));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "ON" => Some("1".into()),
            "OFF" => Some("0".into()),
            "NAME" => Some("web".into()),
            _ => None,
        }
    }

    fn run(text: &str) -> (Vec<Line>, Diagnostics) {
        let ctx = CondContext {
            lookup: &env,
            features: &["REGEX"],
            enabled: &[],
            version: "2.6",
        };
        let mut diags = Vec::new();
        let mut env_changes = EnvChanges::default();
        let lines = preprocess(
            &Arc::from("t.cfg"),
            text,
            (&ctx, &mut env_changes),
            &mut diags,
        );
        (lines, diags)
    }

    /// The words of each kept line, joined with spaces; fails on any diagnostic.
    fn kept(text: &str) -> Vec<String> {
        let (lines, diags) = run(text);
        assert!(diags.is_empty(), "unexpected diagnostics: {diags:?}");
        lines.into_iter().map(|l| l.words.join(" ")).collect()
    }

    /// The diagnostics as `line: keyword: message` strings.
    fn problems(text: &str) -> Vec<String> {
        let (_, diags) = run(text);
        diags
            .iter()
            .map(|d| {
                format!(
                    "{} {}: {}: {}",
                    d.severity.tag(),
                    d.span.as_ref().map_or(0, |s| s.line),
                    d.keyword.as_deref().unwrap_or(""),
                    d.message
                )
            })
            .collect()
    }

    #[test]
    fn plain_lines_with_spans() {
        let (lines, diags) =
            run("global\n  maxconn 10 # comment\n\n# only comment\r\nfrontend fe\r\n");
        assert!(diags.is_empty());
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1].words, ["maxconn", "10"]);
        assert_eq!(lines[1].span, Span::new(&Arc::from("t.cfg"), 2));
        assert_eq!(lines[2].span.line, 5);
        assert_eq!(lines[2].words, ["frontend", "fe"]);
    }

    #[test]
    fn pseudo_variables() {
        let text = "\
x \"${.SECTION}\"
global
x \"$.SECTION\"
frontend \"fe-$.LINE\"
x \"${.SECTION}@${.FILE}:${.LINE}\"
backend
x \"$.SECTION\"
x \"$NAME\"
";
        assert_eq!(
            kept(text),
            [
                "x ",
                "global",
                "x global",
                "frontend fe-4",
                "x fe-4@t.cfg:5",
                "backend",
                "x backend",
                "x web"
            ]
        );
    }

    #[test]
    fn environment_changes_of_global_sections_apply_to_the_next_lines() {
        assert_eq!(
            kept(
                "global\n setenv PORT 8080\n presetenv NAME nope\n unsetenv ON\n\
                 .if defined(ON)\n on\n.endif\n\
                 frontend \"${NAME}\"\n bind :\"${PORT}\"\n setenv NAME other\n\
                 backend \"${NAME}\"\n"
            ),
            [
                "global",
                "setenv PORT 8080",
                "presetenv NAME nope",
                "unsetenv ON",
                "frontend web",
                "bind :8080",
                // Not in a global section: no change (the parser refuses the keyword there).
                "setenv NAME other",
                "backend web",
            ]
        );
        // A change in a dead branch does not happen.
        assert_eq!(
            kept("global\n.if defined(NOPE)\n setenv X 1\n.endif\n x \"${X}\"\n"),
            ["global", "x "]
        );
    }

    #[test]
    fn if_else() {
        let text = "\
.if 1
a
.else
b
.endif
.if 0
c
.else
d
.endif
.if
e
.endif
";
        assert_eq!(kept(text), ["a", "d"]);
    }

    #[test]
    fn conditions_use_the_environment() {
        let text = "\
.if \"$ON\"
on
.endif
.if \"$OFF\"
off
.endif
.if defined(ON) && streq(\"$NAME\",web) && feature(REGEX)
all
.endif
.if streq(\"$NAME\", web)
spaces-count
.endif
";
        assert_eq!(kept(text), ["on", "all"]);
    }

    #[test]
    fn elif_chains() {
        let chain = |a: &str, b: &str, c: &str| {
            format!(".if {a}\nA\n.elif {b}\nB\n.elif {c}\nC\n.else\nD\n.endif\n")
        };
        assert_eq!(kept(&chain("1", "1", "1")), ["A"]);
        assert_eq!(kept(&chain("0", "1", "1")), ["B"]);
        assert_eq!(kept(&chain("0", "0", "1")), ["C"]);
        assert_eq!(kept(&chain("0", "0", "0")), ["D"]);
    }

    #[test]
    fn elif_after_taken_branch_is_not_evaluated() {
        // The broken condition is never looked at because the first branch was taken.
        assert_eq!(kept(".if 1\na\n.elif nope(\nb\n.endif"), ["a"]);
    }

    #[test]
    fn nesting() {
        let text = "\
.if 1
  a
  .if 0
    b
  .else
    c
    .if 1
      d
    .endif
  .endif
  e
.endif
f
";
        assert_eq!(kept(text), ["a", "c", "d", "e", "f"]);
    }

    #[test]
    fn dead_branches_nest_without_evaluating() {
        let text = "\
.if 0
  .if nope(
    a
  .elif also-broken)
    b
  .else
    c
  .endif
  .alert \"never\"
  .bogus
  d
.else
  e
.endif
";
        assert_eq!(kept(text), ["e"]);
    }

    #[test]
    fn messages() {
        let text = "\
.diag \"d\"
.notice \"A=1,\" B=1
.warning w
.alert \"a\"
.if 0
.alert \"dead\"
.endif
.notice
";
        let (lines, diags) = run(text);
        assert!(lines.is_empty());
        let got: Vec<_> = diags
            .iter()
            .map(|d| (d.severity, d.keyword.clone().unwrap(), d.message.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (Severity::Diag, ".diag".to_string(), "d".to_string()),
                (Severity::Notice, ".notice".into(), "A=1, B=1".into()),
                (Severity::Warning, ".warning".into(), "w".into()),
                (Severity::Alert, ".alert".into(), "a".into()),
                (Severity::Notice, ".notice".into(), String::new()),
            ]
        );
        assert_eq!(diags[3].span, Some(Span::new(&Arc::from("t.cfg"), 4)));
    }

    #[test]
    fn manual_example() {
        let text = "\
.if \"${ON}\"
  .if \"${OFF}\"
     .notice \"A=1, B=1\"
  .elif \"${UNSET}\"
     .notice \"A=1, B=0, C=1\"
  .elif \"${ON}\"
     .warning \"A=1, B=0, C=0, D=1\"
  .else
     .alert \"A=1, B=0, C=0, D=0\"
  .endif
.else
     .notice \"A=0\"
.endif
";
        assert_eq!(
            problems(text),
            ["[WARNING] 7: .warning: A=1, B=0, C=0, D=1"]
        );
    }

    #[test]
    fn structure_errors() {
        assert_eq!(
            problems(".elif 1"),
            ["[ALERT] 1: .elif: no .if block is open"]
        );
        assert_eq!(
            problems(".else"),
            ["[ALERT] 1: .else: no .if block is open"]
        );
        assert_eq!(
            problems("x\n.endif"),
            ["[ALERT] 2: .endif: no .if block is open"]
        );
        assert_eq!(
            problems(".if 1\n.else\n.elif 1\n.endif"),
            ["[ALERT] 3: .elif: not allowed after .else"]
        );
        assert_eq!(
            problems(".if 1\n.else\n.else\n.endif"),
            ["[ALERT] 3: .else: this block already has an .else"]
        );
        assert_eq!(
            problems(".if 1\n.else x\n.endif y"),
            [
                "[ALERT] 2: .else: unexpected argument 'x'",
                "[ALERT] 3: .endif: unexpected argument 'y'"
            ]
        );
    }

    #[test]
    fn structure_errors_are_reported_in_dead_branches_too() {
        assert_eq!(
            problems(".if 0\n.if 1\n.else\n.else\n.endif\n.endif"),
            ["[ALERT] 4: .else: this block already has an .else"]
        );
    }

    #[test]
    fn missing_endif_reported_at_each_open_if() {
        assert_eq!(
            problems("a\n.if 1\nb\n.if 0\nc"),
            [
                "[ALERT] 2: .if: missing .endif",
                "[ALERT] 4: .if: missing .endif"
            ]
        );
        let (lines, _) = run(".if 1\nb");
        assert_eq!(lines.len(), 1);
    }

    #[test]
    fn condition_errors_make_the_whole_block_false() {
        let text = ".if nope(x)\na\n.elif 1\nb\n.else\nc\n.endif\nd";
        let (lines, diags) = run(text);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].words, ["d"]);
        assert_eq!(diags.len(), 1);
        assert_eq!(
            diags[0].to_string(),
            "[ALERT] t.cfg:1: .if: unknown predicate 'nope'"
        );
        assert_eq!(
            problems(".if 0\n.elif (1\n.else\nx\n.endif"),
            ["[ALERT] 2: .elif: missing ')'"]
        );
    }

    #[test]
    fn lexer_errors() {
        assert_eq!(
            problems("bind \"oops\nx 'y"),
            [
                "[ALERT] 1: bind: unterminated double quote",
                "[ALERT] 2: x: unterminated single quote"
            ]
        );
        assert_eq!(
            problems("\"oops"),
            ["[ALERT] 1: lexer: unterminated double quote"]
        );
        assert_eq!(
            problems("mode http\\"),
            ["[ALERT] 1: mode: backslash at end of line (there is no line continuation)"]
        );
        // Reported in dead branches too.
        assert_eq!(
            problems(".if 0\nx \\xZZ\n.endif"),
            ["[ALERT] 2: x: invalid \\x escape: two hexadecimal digits must follow \\x"]
        );
    }

    #[test]
    fn lexer_errors_on_directives_keep_the_block_structure() {
        let text = ".if streq(\"$ON,1)\na\n.else\nb\n.endif\nc";
        let (lines, diags) = run(text);
        let words: Vec<_> = lines.iter().map(|l| l.words.join(" ")).collect();
        assert_eq!(words, ["c"]);
        assert_eq!(diags.len(), 1);
        assert_eq!(
            diags[0].to_string(),
            "[ALERT] t.cfg:1: .if: unterminated double quote"
        );
        let text = ".if 0\na\n.elif \"oops\nb\n.else\nc\n.endif";
        assert_eq!(
            problems(text),
            ["[ALERT] 3: .elif: unterminated double quote"]
        );
        assert!(run(text).0.is_empty());
    }

    #[test]
    fn unknown_directives() {
        assert_eq!(
            problems(".include foo"),
            ["[ALERT] 1: .include: unknown directive"]
        );
        assert_eq!(problems("."), ["[ALERT] 1: .: unknown directive"]);
        // A quoted first word is still a directive once lexed.
        assert_eq!(kept("\".if\" 1\na\n.endif"), ["a"]);
    }

    #[test]
    fn empty_text() {
        assert!(kept("").is_empty());
        assert!(kept("\n\n   \n").is_empty());
    }
}
