//! The environment as the `global` section's `setenv`, `presetenv`, `unsetenv` and
//! `resetenv` lines change it (configuration.txt §3.1): each change takes effect at once, so
//! the next line's `"${NAME}"` and `.if defined(NAME)` see it, and the running process's
//! `env()` fetch sees the end result.
//!
//! The changes are kept beside the process's own environment, which is never written: they
//! are asked first, and the process's environment answers for the names they leave alone.

use std::collections::{HashMap, HashSet};

/// What the configuration did to the environment so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvChanges {
    /// Names set (`Some`) or removed (`None`).
    changed: HashMap<String, Option<String>>,
    /// Variables the process defines for itself (`HAPROXY_LOCALPEER`, `HAPROXY_CLI`...), seen
    /// beside the process's environment, under the changes.
    defined: Vec<(String, String)>,
    /// After `resetenv`: the only names of the process's environment still there.
    kept: Option<HashSet<String>>,
}

impl EnvChanges {
    /// The value of `name` with the changes applied over `base`, the process's environment.
    pub fn lookup(&self, name: &str, base: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        if let Some(changed) = self.changed.get(name) {
            return changed.clone();
        }
        match &self.kept {
            Some(kept) if !kept.contains(name) => None,
            _ => match self.defined.iter().find(|(n, _)| n == name) {
                Some((_, value)) => Some(value.clone()),
                None => base(name),
            },
        }
    }

    /// Defines the variables the process sets for itself, as HAProxy does once started.
    pub fn define(&mut self, vars: Vec<(String, String)>) {
        self.defined = vars;
    }

    /// The whole environment with the changes applied over `base`, the process's variables.
    pub fn environment(
        &self,
        base: impl Iterator<Item = (String, String)>,
    ) -> Vec<(String, String)> {
        let defined = |name: &str| self.defined.iter().any(|(n, _)| n == name);
        let base = base
            .filter(|(name, _)| !defined(name))
            .chain(self.defined.iter().cloned());
        let mut all: Vec<(String, String)> = base
            .filter(|(name, _)| !self.changed.contains_key(name))
            .filter(|(name, _)| self.kept.as_ref().is_none_or(|kept| kept.contains(name)))
            .collect();
        all.extend(
            self.changed
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.clone()?))),
        );
        all
    }

    /// Applies a `global` line if it is one of the four keywords (its words as the lexer gave
    /// them, the keyword first); the parser checks the arguments' count.
    pub fn apply(&mut self, words: &[String], base: &dyn Fn(&str) -> Option<String>) {
        let (Some(keyword), args) = (words.first(), words.get(1..).unwrap_or_default()) else {
            return;
        };
        match (keyword.as_str(), args) {
            ("setenv", [name, value]) => {
                self.changed.insert(name.clone(), Some(value.clone()));
            }
            ("presetenv", [name, value]) if self.lookup(name, base).is_none() => {
                self.changed.insert(name.clone(), Some(value.clone()));
            }
            ("unsetenv", names) => {
                for name in names {
                    self.changed.insert(name.clone(), None);
                }
            }
            ("resetenv", names) => {
                // What the configuration set survives only if named, as the rest does; a name
                // an earlier `resetenv` removed stays removed.
                self.changed.retain(|name, _| names.contains(name));
                let named: HashSet<String> = names.iter().cloned().collect();
                self.kept = Some(match self.kept.take() {
                    Some(kept) => named.intersection(&kept).cloned().collect(),
                    None => named,
                });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/root".to_owned()),
            "LANG" => Some("C".to_owned()),
            _ => None,
        }
    }

    fn line(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn each_change_takes_effect_in_order() {
        let mut env = EnvChanges::default();
        assert_eq!(env.lookup("HOME", &base).as_deref(), Some("/root"));
        env.apply(&line("setenv HOME /tmp"), &base);
        env.apply(&line("presetenv HOME /nope"), &base);
        env.apply(&line("presetenv PORT 8080"), &base);
        assert_eq!(env.lookup("HOME", &base).as_deref(), Some("/tmp"));
        assert_eq!(env.lookup("PORT", &base).as_deref(), Some("8080"));
        env.apply(&line("unsetenv LANG PORT NEVER"), &base);
        assert_eq!(env.lookup("LANG", &base), None);
        assert_eq!(env.lookup("PORT", &base), None);
        env.apply(&line("presetenv LANG fr"), &base);
        assert_eq!(env.lookup("LANG", &base).as_deref(), Some("fr"));
    }

    #[test]
    fn resetenv_keeps_only_the_names_given() {
        let mut env = EnvChanges::default();
        env.apply(&line("setenv A 1"), &base);
        env.apply(&line("setenv B 2"), &base);
        env.apply(&line("resetenv HOME B"), &base);
        assert_eq!(env.lookup("HOME", &base).as_deref(), Some("/root"));
        assert_eq!(env.lookup("LANG", &base), None);
        assert_eq!(env.lookup("A", &base), None);
        assert_eq!(env.lookup("B", &base).as_deref(), Some("2"));
        env.apply(&line("setenv LANG de"), &base);
        assert_eq!(env.lookup("LANG", &base).as_deref(), Some("de"));
        // Removed by the first, not brought back by the second.
        env.apply(&line("resetenv LANG LOGNAME"), &base);
        assert_eq!(env.lookup("HOME", &base), None);
        assert_eq!(env.lookup("LANG", &base).as_deref(), Some("de"));
        let mut twice = EnvChanges::default();
        twice.apply(&line("resetenv HOME"), &base);
        twice.apply(&line("resetenv LANG"), &base);
        assert_eq!(twice.lookup("LANG", &base), None);
    }

    #[test]
    fn the_whole_environment_agrees_with_lookups() {
        let mut env = EnvChanges::default();
        env.apply(&line("setenv A 1"), &base);
        env.apply(&line("unsetenv LANG"), &base);
        env.apply(&line("setenv HOME /tmp"), &base);
        let vars = || ["HOME", "LANG"].map(|n| (n.to_owned(), base(n).unwrap_or_default()));
        let mut all = env.environment(vars().into_iter());
        all.sort();
        let expected = [("A", "1"), ("HOME", "/tmp")].map(|(n, v)| (n.to_owned(), v.to_owned()));
        assert_eq!(all, expected);
        env.apply(&line("resetenv A"), &base);
        assert_eq!(
            env.environment(vars().into_iter()),
            [("A".to_owned(), "1".to_owned())]
        );
    }

    #[test]
    fn defined_variables_sit_between_the_environment_and_the_changes() {
        let mut env = EnvChanges::default();
        env.define(vec![
            ("HOME".into(), "/srv".into()),
            ("HAPROXY_CLI".into(), "x".into()),
        ]);
        assert_eq!(env.lookup("HOME", &base).as_deref(), Some("/srv"));
        assert_eq!(env.lookup("LANG", &base).as_deref(), Some("C"));
        env.apply(&line("setenv HAPROXY_CLI y"), &base);
        assert_eq!(env.lookup("HAPROXY_CLI", &base).as_deref(), Some("y"));
        let vars = ["HOME", "LANG"].map(|n| (n.to_owned(), base(n).unwrap_or_default()));
        let mut all = env.environment(vars.into_iter());
        all.sort();
        let expected = [("HAPROXY_CLI", "y"), ("HOME", "/srv"), ("LANG", "C")]
            .map(|(n, v)| (n.to_owned(), v.to_owned()));
        assert_eq!(all, expected);
    }
}
