//! A configuration file, read the way `sluice -c` reads it: lexed, pre-processed (`.if`,
//! `${VAR}`), parsed into sections and checked into a plan. Any text must end in a plan or in
//! diagnostics, never in a panic. Files the text names are read (error files, maps), so
//! devices and kernel files are left out.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_config::cond::CondContext;
use sluice_config::plan;
use sluice_config::reader::Source;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if ["dev/", "proc/", "sys/"].iter().any(|p| text.contains(p)) {
        return;
    }
    let sources = [Source {
        name: "fuzz.cfg".into(),
        text: text.to_owned(),
    }];
    let ctx = CondContext {
        lookup: &|name| (name == "FUZZ_SET").then(|| "yes".to_owned()),
        features: &["THREAD"],
        enabled: &[],
        version: "2.6",
    };
    let checked = plan::check(&sources, &ctx);
    for diag in &checked.diagnostics {
        diag.to_string();
    }
});
