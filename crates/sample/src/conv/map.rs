//! Map converters (configuration.txt §7.3.1 `map`): `map`, `map_<match>` and
//! `map_<match>_<output>`, looking the input up in a map file.
//!
//! `<match>` is one of `str` (the default), `beg`, `sub`, `dir`, `dom`, `end`, `reg`,
//! `regm`, `int`, `ip`; `<output>` one of `str` (the default), `int`, `ip`, `key`. The file
//! is loaded when the expression is compiled, through the [`MapStore`], and shared with
//! every other user of the same file. Values are copied out of the map (the runtime API may change it meanwhile); a miss
//! returns the default value if one was given and fails the sample otherwise.

use std::sync::Arc;

use super::{Built, ConvBuild, ConvDef, Convert, into_bytes};
use crate::args::str_arg;
use crate::context::Context;
use crate::map::{MapOutput, MapValue};
use crate::patref::{MapRead, MapView};
use crate::pattern::MatchMethod;
use crate::value::{Sample, SampleType, parse_int_exact, parse_ip};

/// A compiled map converter.
#[derive(Debug)]
struct MapConv {
    map: Arc<MapView>,
    output: MapOutput,
    default: Option<MapValue>,
    /// `map_regm`: the value is a template with `\N` references to the regex's groups.
    regm: bool,
}

/// The value as a sample that owns its bytes: the map may change once its lock is released.
fn owned_sample(value: &MapValue) -> Sample<'static> {
    match value {
        MapValue::Str(s) => Sample::owned_str(s.clone()),
        MapValue::Int(i) => Sample::Int(*i),
        MapValue::Ip(ip) => Sample::Ip(*ip),
    }
}

fn value_sample(value: &MapValue) -> Sample<'_> {
    match value {
        MapValue::Str(s) => Sample::str(s),
        MapValue::Int(i) => Sample::Int(*i),
        MapValue::Ip(ip) => Sample::Ip(*ip),
    }
}

impl Convert for MapConv {
    fn convert<'a>(&'a self, input: Sample<'a>, _: &'a dyn Context) -> Option<Sample<'a>> {
        if self.regm {
            let bytes = into_bytes(input)?;
            return match self.map.read().lookup_regm(&bytes) {
                Some(v) => Some(Sample::owned_str(v)),
                None => self.default.as_ref().map(value_sample),
            };
        }
        // A map the runtime API edited is read under a lock: what the lookup finds is copied
        // out (see `crate::patref::MapView`). A configured map is borrowed.
        let map = match self.map.read() {
            MapRead::Initial(map) => {
                return match map.lookup(&input) {
                    Some(entry) if self.output == MapOutput::Key => Some(Sample::str(&entry.key)),
                    Some(entry) => Some(value_sample(&entry.value)),
                    None => self.default.as_ref().map(value_sample),
                };
            }
            live => live,
        };
        match map.lookup(&input) {
            Some(entry) if self.output == MapOutput::Key => {
                Some(Sample::owned_str(entry.key.clone()))
            }
            Some(entry) => Some(owned_sample(&entry.value)),
            None => self.default.as_ref().map(value_sample),
        }
    }
}

/// Splits a map converter's name into its matching method, output, and `regm` flag.
fn parse_name(name: &str) -> Option<(MatchMethod, MapOutput, bool)> {
    if name == "map" {
        return Some((MatchMethod::Str, MapOutput::Str, false));
    }
    let rest = name.strip_prefix("map_")?;
    let (method, output) = match rest.split_once('_') {
        Some((m, o)) => (m, Some(o)),
        None => (rest, None),
    };
    let output = match output {
        None | Some("str") => MapOutput::Str,
        Some("int") => MapOutput::Int,
        Some("ip") => MapOutput::Ip,
        Some("key") => MapOutput::Key,
        Some(_) => return None,
    };
    if method == "regm" {
        return (output == MapOutput::Str).then_some((MatchMethod::Reg, output, true));
    }
    let method = match method {
        "str" => MatchMethod::Str,
        "beg" => MatchMethod::Beg,
        "sub" => MatchMethod::Sub,
        "dir" => MatchMethod::Dir,
        "dom" => MatchMethod::Dom,
        "end" => MatchMethod::End,
        "reg" => MatchMethod::Reg,
        "int" => MatchMethod::Int,
        "ip" => MatchMethod::Ip,
        _ => return None,
    };
    Some((method, output, false))
}

fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let (method, output, regm) =
        parse_name(b.name).ok_or_else(|| format!("unknown map converter '{}'", b.name))?;
    let path = str_arg(b.args, 0).unwrap_or("");
    let map = b.maps.map(path, method, output)?;
    let default = match str_arg(b.args, 1) {
        None => None,
        Some(_) if output == MapOutput::Key => {
            return Err("a default value is not supported with the 'key' output".to_string());
        }
        Some(text) => Some(match output {
            MapOutput::Int => MapValue::Int(
                parse_int_exact(text)
                    .ok_or_else(|| format!("default value '{text}' is not a valid integer"))?,
            ),
            MapOutput::Ip => MapValue::Ip(parse_ip(text.as_bytes()).ok_or_else(|| {
                format!("default value '{text}' is not a valid IPv4 or IPv6 address")
            })?),
            _ => MapValue::Str(text.as_bytes().to_vec()),
        }),
    };
    let out = match output {
        MapOutput::Int => SampleType::Int,
        MapOutput::Ip => SampleType::Ip,
        MapOutput::Str | MapOutput::Key => SampleType::Str,
    };
    Built::new(
        MapConv {
            map,
            output,
            default,
            regm,
        },
        out,
    )
}

/// The definition of map converter `name`, if it is one.
pub(super) fn lookup(name: &str) -> Option<ConvDef> {
    let (method, _, _) = parse_name(name)?;
    let input = match method {
        MatchMethod::Int => SampleType::Int,
        MatchMethod::Ip => SampleType::Ip,
        _ => SampleType::Str,
    };
    Some(ConvDef {
        min_args: 1,
        max_args: 2,
        input: Some(input),
        build,
    })
}
