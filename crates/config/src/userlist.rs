//! `userlist` sections (configuration.txt §3.4): users, their passwords and their groups,
//! for the `http_auth` and `http_auth_group` fetches.
//!
//! A section holds `group NAME [users U1,U2...]` and `user NAME [password HASH |
//! insecure-password PASS] [groups G1,G2...]` lines. Membership may be given on either side;
//! both are merged into each user's list of groups once the whole section is read, and a
//! name that refers to no declared user or group is an error, as in HAProxy. Duplicated
//! users, groups and lists are ignored with a warning (HAProxy's behaviour). Password hashes
//! are checked here, so an unsupported scheme (MD5-crypt, DES) fails `sluice -c` rather than
//! every login. The lists are handed to the sample engine through the configuration's
//! [`MapStore`] before the proxies are read; read [`parse_userlists`] first.

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::preprocess::Line;
use crate::sections::{Section, SectionKind};
use sluice_sample::{MapStore, Password, User, Userlist};

/// A user as declared, before group membership is merged.
struct Declared {
    user: User,
    span: Span,
}

/// Parses every `userlist` section and registers the lists in `maps`.
pub fn parse_userlists(sections: &[Section], maps: &MapStore, diags: &mut Diagnostics) {
    let mut seen: Vec<&str> = Vec::new();
    for section in sections.iter().filter(|s| s.kind == SectionKind::Userlist) {
        let Some(name) = section.name.as_deref() else {
            continue;
        };
        if seen.contains(&name) {
            diags.push(Diagnostic::warning(
                &section.span,
                "userlist",
                format!("ignoring duplicated userlist '{name}'"),
            ));
            continue;
        }
        seen.push(name);
        maps.add_userlist(parse_section(name, &section.lines, diags));
    }
}

fn parse_section(name: &str, lines: &[Line], diags: &mut Diagnostics) -> Userlist {
    let mut users: Vec<Declared> = Vec::new();
    // Group name, the users its line names, and where it was declared.
    let mut groups: Vec<(String, Vec<String>, Span)> = Vec::new();
    for line in lines {
        let Some(keyword) = line.words.first() else {
            continue;
        };
        let alert = |message: String| Diagnostic::alert(&line.span, keyword.clone(), message);
        match keyword.as_str() {
            "group" => match parse_group(&line.words[1..]) {
                Ok((group, members)) => {
                    if groups.iter().any(|(g, _, _)| *g == group) {
                        diags.push(Diagnostic::warning(
                            &line.span,
                            "group",
                            format!("ignoring duplicated group '{group}' in userlist '{name}'"),
                        ));
                    } else {
                        groups.push((group, members, line.span.clone()));
                    }
                }
                Err(message) => diags.push(alert(message)),
            },
            "user" => match parse_user(&line.words[1..]) {
                Ok(user) => {
                    if users.iter().any(|d| d.user.name == user.name) {
                        diags.push(Diagnostic::warning(
                            &line.span,
                            "user",
                            format!(
                                "ignoring duplicated user '{}' in userlist '{name}'",
                                user.name
                            ),
                        ));
                    } else {
                        users.push(Declared {
                            user,
                            span: line.span.clone(),
                        });
                    }
                }
                Err(message) => diags.push(alert(message)),
            },
            other => diags.push(alert(format!(
                "unknown keyword '{other}' in 'userlist' section"
            ))),
        }
    }
    // Membership declared on the user's line must name declared groups.
    for d in &users {
        for group in &d.user.groups {
            if !groups.iter().any(|(g, _, _)| g == group) {
                diags.push(Diagnostic::alert(
                    &d.span,
                    "user",
                    format!(
                        "userlist '{name}': no such group '{group}' specified in user '{}'",
                        d.user.name
                    ),
                ));
            }
        }
    }
    // Membership declared on the group's line is added to its users.
    for (group, members, span) in &groups {
        for member in members {
            match users.iter_mut().find(|d| d.user.name == *member) {
                Some(d) => {
                    if !d.user.groups.contains(group) {
                        d.user.groups.push(group.clone());
                    }
                }
                None => diags.push(Diagnostic::alert(
                    span,
                    "group",
                    format!(
                        "userlist '{name}': no such user '{member}' specified in group '{group}'"
                    ),
                )),
            }
        }
    }
    Userlist {
        name: name.to_owned(),
        users: users.into_iter().map(|d| d.user).collect(),
        groups: groups.into_iter().map(|(g, _, _)| g).collect(),
    }
}

/// A comma-separated list option (`users a,b`, `groups g1,g2`); empty items are skipped.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn parse_group(args: &[String]) -> Result<(String, Vec<String>), String> {
    let Some(name) = args.first() else {
        return Err("'group' expects a group name".to_owned());
    };
    match &args[1..] {
        [] => Ok((name.clone(), Vec::new())),
        [kw, users] if kw == "users" => Ok((name.clone(), list(users))),
        [kw] if kw == "users" => Err("'users' expects a comma-separated list of users".to_owned()),
        [other, ..] => Err(format!("unexpected argument '{other}' (expects 'users')")),
    }
}

fn parse_user(args: &[String]) -> Result<User, String> {
    let Some(name) = args.first() else {
        return Err("'user' expects a user name".to_owned());
    };
    // A user without a password exists (it can be put in groups) but never authenticates.
    let mut password = None;
    let mut groups = Vec::new();
    let mut i = 1;
    while let Some(word) = args.get(i) {
        let value = args
            .get(i + 1)
            .ok_or_else(|| format!("'{word}' expects an argument"))?;
        match word.as_str() {
            "password" => password = Some(Password::hashed(value)?),
            "insecure-password" => password = Some(Password::Clear(value.clone())),
            "groups" => groups = list(value),
            other => {
                return Err(format!(
                    "unexpected argument '{other}' (expects 'password', 'insecure-password' or 'groups')"
                ));
            }
        }
        i += 2;
    }
    Ok(User {
        name: name.clone(),
        password: password.unwrap_or(Password::Locked),
        groups,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::sections::group_sections;
    use std::sync::Arc;

    fn read(text: &str) -> (MapStore, Vec<String>) {
        let file: Arc<str> = Arc::from("t.cfg");
        let lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| Line {
                span: Span::new(&file, i as u32 + 1),
                words: l.split_whitespace().map(str::to_owned).collect(),
            })
            .collect();
        let mut diags = Vec::new();
        let sections = group_sections(lines, &mut diags);
        let maps = MapStore::new();
        parse_userlists(&sections, &maps, &mut diags);
        (maps, diags.iter().map(|d| d.to_string()).collect())
    }

    #[test]
    fn membership_from_both_sides_is_merged() {
        let (maps, diags) = read(
            "userlist L\n\
             group G1 users tiger,scott\n\
             group G2\n\
             user tiger insecure-password pw\n\
             user scott insecure-password elgato groups G2\n\
             user xdb password $5$rounds=1000$CzCgMB7e5VTSM5wE$ZErSu9omkcLRVuiLWwC5v1bMWz8y.3NT8k3o6DgkEhA",
        );
        assert!(diags.is_empty(), "{diags:?}");
        let list = maps.userlist("L").unwrap();
        assert_eq!(list.groups, ["G1", "G2"]);
        let scott = list.authenticate(b"scott", b"elgato").unwrap();
        assert_eq!(scott.groups, ["G2", "G1"]);
        assert!(list.authenticate(b"xdb", b"secret").is_some());
        assert!(list.authenticate(b"tiger", b"elgato").is_none());
    }

    #[test]
    fn mistakes_are_reported_with_their_line() {
        let (maps, diags) = read(
            "userlist L\n\
             group G1 users tiger,nobody\n\
             user tiger\n\
             user scott insecure-password x groups G1,G9\n\
             user scott insecure-password y\n\
             group G1\n\
             user md5 password $1$salt$qJH7.N4xYta3aEG/dfqo/0\n\
             foo bar\n\
             userlist L\n",
        );
        assert_eq!(
            diags,
            [
                "[WARNING] t.cfg:5: user: ignoring duplicated user 'scott' in userlist 'L'",
                "[WARNING] t.cfg:6: group: ignoring duplicated group 'G1' in userlist 'L'",
                "[ALERT] t.cfg:7: user: password hash scheme MD5-crypt ('$1$') is not supported by Sluice (use SHA-256 '$5$', SHA-512 '$6$' or bcrypt '$2b$', or 'insecure-password')",
                "[ALERT] t.cfg:8: foo: unknown keyword 'foo' in 'userlist' section",
                "[ALERT] t.cfg:4: user: userlist 'L': no such group 'G9' specified in user 'scott'",
                "[ALERT] t.cfg:2: group: userlist 'L': no such user 'nobody' specified in group 'G1'",
                "[WARNING] t.cfg:9: userlist: ignoring duplicated userlist 'L'",
            ]
        );
        // A user without a password never logs in.
        let list = maps.userlist("L").unwrap();
        assert!(list.authenticate(b"tiger", b"").is_none());
    }
}
