//! What this build of Sluice tells configurations about itself: the HAProxy configuration
//! language level it implements and the capabilities `feature()`/`enabled()` answer for.
//!
//! `version_atleast()`/`version_before()` in `.if` blocks compare against
//! [`CONFIG_LANGUAGE_LEVEL`], the HAProxy version whose configuration language Sluice follows
//! (the Debian HAProxy it is tested against side by side), not Sluice's own version: a
//! configuration written for HAProxy 2.6 then selects its 2.6 blocks. `feature()` is true only
//! for capabilities Sluice really has, so `.if feature(OPENSSL)` blocks stay off.

use sluice_config::cond::CondContext;
use std::collections::HashMap;

/// The HAProxy configuration language level Sluice implements.
pub const CONFIG_LANGUAGE_LEVEL: &str = "2.6";

/// Names `feature()` answers true for (the `+` entries of HAProxy's `-vv` feature list that
/// describe something Sluice does).
pub const FEATURES: &[&str] = &["ACCEPT4", "EPOLL", "GETADDRINFO", "THREAD"];

/// Names `enabled()` answers true for.
pub const ENABLED: &[&str] = &["EPOLL", "GETADDRINFO"];

/// The process environment as configurations see it: the real environment plus the
/// variables HAProxy defines for them (management.txt §2.3), without changing the process's
/// own environment.
pub struct ConfigEnv {
    extra: HashMap<&'static str, String>,
}

impl ConfigEnv {
    /// The environment with `HAPROXY_LOCALPEER` set to `local_peer`.
    pub fn new(local_peer: String) -> Self {
        let mut extra = HashMap::new();
        extra.insert("HAPROXY_LOCALPEER", local_peer);
        extra.insert("HAPROXY_BRANCH", CONFIG_LANGUAGE_LEVEL.to_owned());
        extra.insert("HAPROXY_STARTUP_VERSION", CONFIG_LANGUAGE_LEVEL.to_owned());
        ConfigEnv { extra }
    }

    /// The value of `name`, if set.
    pub fn lookup(&self, name: &str) -> Option<String> {
        self.extra
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
    }
}

/// The context `.if` conditions and `-cc` are evaluated in, with `lookup` for variables.
pub fn cond_context<'a>(lookup: &'a dyn Fn(&str) -> Option<String>) -> CondContext<'a> {
    CondContext {
        lookup,
        features: FEATURES,
        enabled: ENABLED,
        version: CONFIG_LANGUAGE_LEVEL,
    }
}

/// The `-v` line.
pub fn version_line() -> String {
    format!(
        "Sluice version {} - implements the HAProxy {CONFIG_LANGUAGE_LEVEL} configuration language",
        env!("CARGO_PKG_VERSION")
    )
}

/// The `-vv` report.
pub fn build_report() -> String {
    let features: Vec<String> = FEATURES.iter().map(|f| format!("+{f}")).collect();
    let enabled: Vec<String> = ENABLED.iter().map(|f| format!("+{f}")).collect();
    format!(
        "{}\n\
         Configuration language level (version_atleast/version_before): {CONFIG_LANGUAGE_LEVEL}\n\
         Feature list : {}\n\
         Run-time options (enabled()) : {}\n\
         Default settings : bufsize = 16384, maxrewrite = 1024\n\
         Built with multi-threading support (default nbthread = number of CPUs).\n\
         Available polling systems : epoll\n",
        version_line(),
        features.join(" "),
        enabled.join(" ")
    )
}
