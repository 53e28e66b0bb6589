//! `set-var(name[,cond...])` (configuration.txt §7.3.1): stores the sample in a variable
//! and passes it on unchanged.
//!
//! Variables live in the stream, which this crate does not own, so the value goes to
//! [`Context::set_var`]; the conditions (`ifexists`, `ifnotempty`, `ifgt`...) read the
//! current value back through [`Context::var`] before deciding. A context without
//! variables ignores the store, and the sample still flows on.

use super::{Built, ConvBuild, Convert};
use crate::args::{str_arg, var_arg};
use crate::context::Context;
use crate::value::{Sample, SampleType};

/// A condition gating the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cond {
    /// `ifexists` / `ifset`: the variable has a value.
    Set,
    /// `ifnotexists` / `ifnotset`.
    NotSet,
    /// `ifempty`: the input is an empty string or binary block.
    Empty,
    /// `ifnotempty`: the input is a scalar or a non-empty block.
    NotEmpty,
    /// `ifgt`: the variable is greater than the input (true unless both are integers).
    Greater,
    /// `iflt`: the variable is less than the input (true unless both are integers).
    Less,
}

/// A compiled `set-var`.
#[derive(Debug)]
pub(super) struct SetVar {
    name: String,
    conds: Vec<Cond>,
}

impl SetVar {
    fn allowed(&self, input: &Sample<'_>, ctx: &dyn Context) -> bool {
        let empty = input.bytes().is_some_and(<[u8]>::is_empty);
        let compare = |pick: fn(i64, i64) -> bool| match (ctx.var(&self.name), input) {
            (Some(Sample::Int(var)), Sample::Int(new)) => pick(var, *new),
            _ => true,
        };
        self.conds.iter().all(|cond| match cond {
            Cond::Set => ctx.var(&self.name).is_some(),
            Cond::NotSet => ctx.var(&self.name).is_none(),
            Cond::Empty => empty,
            Cond::NotEmpty => !empty,
            Cond::Greater => compare(|var, new| var > new),
            Cond::Less => compare(|var, new| var < new),
        })
    }
}

impl Convert for SetVar {
    fn convert<'a>(&'a self, input: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        if self.allowed(&input, ctx) {
            ctx.set_var(&self.name, input.reborrow());
        }
        Some(input)
    }
}

/// Builds `set-var`: the output has the input's type.
pub(super) fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let name = var_arg(str_arg(b.args, 0).unwrap_or(""), 0)?;
    let conds = b
        .args
        .iter()
        .enumerate()
        .skip(1)
        .map(|(index, arg)| match arg.as_str() {
            "ifexists" | "ifset" => Ok(Cond::Set),
            "ifnotexists" | "ifnotset" => Ok(Cond::NotSet),
            "ifempty" => Ok(Cond::Empty),
            "ifnotempty" => Ok(Cond::NotEmpty),
            "ifgt" => Ok(Cond::Greater),
            "iflt" => Ok(Cond::Less),
            other => Err(format!(
                "unknown condition '{other}' at position {}",
                index + 1
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let out: SampleType = b.input;
    Built::new(SetVar { name, conds }, out)
}
