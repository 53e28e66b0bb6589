//! Conditions (configuration.txt §7.2): `if|unless` followed by ACLs combined with an
//! implicit AND, `or`/`||` and `!`, the guard of every rule.
//!
//! [`Condition::parse`] reads the words from `if` or `unless` to the end of the rule: named
//! ACLs (looked up in an [`AclSet`], predefined ones included), anonymous ACLs between `{`
//! and `}` (each brace its own word), `!` in front of a term (repeated `!` toggle; a lone
//! `!` applies to the next term), and `or`/`||` starting a new group. The result is the
//! disjunctive form of §7.2: `a b or c` is `(a and b) or c`. [`Condition::eval`] evaluates
//! left to right and stops as soon as the answer is known. [`Condition::confine`] makes an
//! ACL that can never match at the rule's stages never match, and words HAProxy's warning.
//! Read [`Condition::parse`] first.

use std::fmt;

use crate::acl::{Acl, AclSet, anonymous};
use crate::context::Context;
use crate::stages::Stages;

/// One term of a condition: an ACL, possibly negated.
#[derive(Clone, Debug)]
struct Term {
    acl: Acl,
    negate: bool,
    /// None of the ACL's fetches finds data where the rule runs ([`Condition::confine`]):
    /// the ACL never matches, as a fetch that finds nothing (its negation always does).
    out_of_reach: bool,
}

impl Term {
    fn eval(&self, ctx: &dyn Context) -> bool {
        (!self.out_of_reach && self.acl.eval(ctx)) != self.negate
    }

    fn decide(&self, ctx: &dyn Context) -> Option<bool> {
        let matched = if self.out_of_reach {
            Some(false)
        } else {
            self.acl.decide(ctx)
        };
        matched.map(|m| m != self.negate)
    }
}

/// A compiled `if`/`unless` condition.
#[derive(Clone)]
pub struct Condition {
    unless: bool,
    /// OR of ANDs.
    groups: Vec<Vec<Term>>,
    text: String,
}

impl fmt::Debug for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condition")
            .field("text", &self.text)
            .finish()
    }
}

impl Condition {
    /// Parses `words`, which start with `if` or `unless`.
    ///
    /// Rejects: a first word other than `if`/`unless`; no term after it; an empty group
    /// before or after `or`; an unknown ACL ("no such ACL : 'foo'"); an anonymous ACL
    /// without its `}` ("missing closing '}' in condition") or with an invalid expression
    /// (see [`AclSet::add`]).
    pub fn parse(words: &[String], acls: &AclSet) -> Result<Condition, String> {
        let (keyword, rest) = words
            .split_first()
            .ok_or_else(|| "expects 'if' or 'unless' followed by a condition".to_string())?;
        let unless = match keyword.as_str() {
            "if" => false,
            "unless" => true,
            other => {
                return Err(format!(
                    "expects 'if' or 'unless' followed by a condition, got '{other}'"
                ));
            }
        };
        let mut groups = Vec::new();
        let mut current: Vec<Term> = Vec::new();
        let mut negate = false;
        let mut i = 0;
        while let Some(word) = rest.get(i) {
            i += 1;
            let mut word = word.as_str();
            while let Some(after) = word.strip_prefix('!') {
                negate = !negate;
                word = after;
            }
            if word.is_empty() {
                continue;
            }
            if word.eq_ignore_ascii_case("or") || word == "||" {
                if current.is_empty() {
                    return Err(format!("missing ACL before '{word}' in condition"));
                }
                groups.push(std::mem::take(&mut current));
                continue;
            }
            let acl = if word == "{" {
                let len = rest[i..]
                    .iter()
                    .position(|w| w == "}")
                    .ok_or_else(|| "missing closing '}' in condition".to_string())?;
                let acl = anonymous(&rest[i..i + len], acls.maps())?;
                i += len + 1;
                acl
            } else {
                acls.get(word)
                    .ok_or_else(|| format!("no such ACL : '{word}'"))?
            };
            current.push(Term {
                acl,
                negate,
                out_of_reach: false,
            });
            negate = false;
        }
        if current.is_empty() {
            return Err(if groups.is_empty() {
                format!("missing condition after '{keyword}'")
            } else {
                "missing ACL after 'or' in condition".to_string()
            });
        }
        groups.push(current);
        Ok(Condition {
            unless,
            groups,
            text: words.join(" "),
        })
    }

    /// Whether the rule applies: true when some group has all its terms true (for `if`),
    /// or when none has (for `unless`).
    pub fn eval(&self, ctx: &dyn Context) -> bool {
        let matched = self
            .groups
            .iter()
            .any(|group| group.iter().all(|t| t.eval(ctx)));
        matched != self.unless
    }

    /// Like [`Condition::eval`] for content inspection: `None` when the answer depends on
    /// data that has not arrived yet, so the rule must wait (HAProxy's "missing data").
    /// A false term decides a group and a true group decides the condition, even while
    /// other terms still miss their data.
    pub fn decide(&self, ctx: &dyn Context) -> Option<bool> {
        let mut missing = false;
        for group in &self.groups {
            let mut group_missing = false;
            let mut group_false = false;
            for t in group {
                match t.decide(ctx) {
                    Some(false) => {
                        group_false = true;
                        break;
                    }
                    Some(true) => {}
                    None => group_missing = true,
                }
            }
            if group_false {
                continue;
            }
            if !group_missing {
                return Some(!self.unless);
            }
            missing = true;
        }
        (!missing).then_some(self.unless)
    }

    /// True for `unless`.
    pub fn is_unless(&self) -> bool {
        self.unless
    }

    /// The condition as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The stages where at least one of the condition's ACLs can find its data.
    pub fn stages(&self) -> Stages {
        self.terms()
            .fold(Stages::NONE, |acc, t| acc | t.acl.stages())
    }

    /// Whether one of the condition's ACLs reads `source`.
    pub fn uses(&self, source: crate::stages::Source) -> bool {
        self.terms().any(|t| t.acl.uses(source))
    }

    fn terms(&self) -> impl Iterator<Item = &Term> {
        self.groups.iter().flatten()
    }

    /// Confines the condition to a rule running at `where_`: an ACL none of whose keywords
    /// finds data there never matches, as in HAProxy, where such a fetch finds nothing (the
    /// proxy keeps the request for the response side, but a response rule must not see
    /// what HAProxy's does not). Returns HAProxy's warning about the first such ACL, the
    /// rule named by [`Stages::checkpoint_name`] and, for content inspection, `rule` ("acl
    /// 'x' will never match in 'tcp-request content' because it only involves keywords
    /// that are incompatible with 'frontend tcp-request content rule'"); `None` when every
    /// ACL may match.
    pub fn confine(&mut self, where_: Stages, rule: Option<&str>) -> Option<String> {
        let mut first = None;
        for term in self.groups.iter_mut().flatten() {
            if term.acl.stages().intersects(where_) {
                continue;
            }
            term.out_of_reach = true;
            first.get_or_insert_with(|| term.acl.clone());
        }
        let acl = first?;
        let place = where_.checkpoint_name();
        let within = rule.map(|r| format!(" in '{r}'")).unwrap_or_default();
        Some(match acl.name() {
            Some(name) => format!(
                "acl '{name}' will never match{within} because it only involves keywords that are incompatible with '{place}'"
            ),
            None => format!(
                "anonymous acl will never match{within} because it uses keyword '{}' which is incompatible with '{place}'",
                acl.first_keyword()
            ),
        })
    }
}

#[cfg(test)]
mod tests;
