//! Conditions (configuration.txt §7.2): `if|unless` followed by ACLs combined with an
//! implicit AND, `or`/`||` and `!`, the guard of every rule.
//!
//! [`Condition::parse`] reads the words from `if` or `unless` to the end of the rule: named
//! ACLs (looked up in an [`AclSet`], predefined ones included), anonymous ACLs between `{`
//! and `}` (each brace its own word), `!` in front of a term (repeated `!` toggle; a lone
//! `!` applies to the next term), and `or`/`||` starting a new group. The result is the
//! disjunctive form of §7.2: `a b or c` is `(a and b) or c`. [`Condition::eval`] evaluates
//! left to right and stops as soon as the answer is known. [`Condition::conflict`] tells the
//! configuration checker when an ACL can never match at the rule's stages (HAProxy warns).
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
            current.push(Term { acl, negate });
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
            .any(|group| group.iter().all(|t| t.acl.eval(ctx) != t.negate));
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
                match t.acl.decide(ctx) {
                    Some(v) if v == t.negate => {
                        group_false = true;
                        break;
                    }
                    Some(_) => {}
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

    /// The first ACL that can never match at `where_` (none of its keywords finds data
    /// there), as HAProxy's warning words it with `where_name` naming the rule ("acl 'x'
    /// will never match because it only involves keywords that are incompatible with
    /// 'frontend http-request header rule'"); `None` when every ACL may match.
    pub fn conflict(&self, where_: Stages, where_name: &str) -> Option<String> {
        let term = self.terms().find(|t| !t.acl.stages().intersects(where_))?;
        Some(match term.acl.name() {
            Some(name) => format!(
                "acl '{name}' will never match because it only involves keywords that are incompatible with '{where_name}'"
            ),
            None => format!(
                "anonymous acl will never match because it uses keyword '{}' which is incompatible with '{where_name}'",
                term.acl.first_keyword()
            ),
        })
    }
}

#[cfg(test)]
mod tests;
