//! Sample expressions (configuration.txt §7.3): a fetch followed by converters,
//! `fetch(args),conv(args),conv`, compiled once and evaluated per stream.
//!
//! The configuration hands [`Expr::parse`] one word (the text of `%[...]`, a `set-var`
//! expression, an ACL criterion); `args::split_chain` applies the second level of quoting,
//! then every keyword is looked up and its arguments checked, every converter's input type
//! checked against the type arriving from the left, regexes compiled and maps loaded, so
//! that a mistake is reported at configuration check time with the keyword's name. The
//! compiled [`Expr`] knows its output type and the [`Stages`] where its fetch finds data.
//! [`Expr::eval`] produces the sample (or `None` when the fetch or a converter fails);
//! [`Expr::eval_each`] hands an ACL every value of a multi-valued fetch. Read
//! [`Expr::parse`] first.

use std::fmt;
use std::sync::Arc;

use crate::args::{Call, split_chain};
use crate::context::Context;
use crate::conv::{self, ConvBuild, Convert};
use crate::fetch::{self, Fetch};
use crate::map::MapStore;
use crate::stages::{Source, Stages};
use crate::value::{Sample, SampleType};

/// One converter of an expression.
#[derive(Clone)]
struct Step {
    /// The type its input is cast to (`None`: taken as it is).
    input: Option<SampleType>,
    conv: Arc<dyn Convert>,
}

/// A compiled sample expression. Cloning is cheap (converters are shared).
#[derive(Clone)]
pub struct Expr {
    text: String,
    fetch_name: String,
    fetch: Fetch,
    source: Source,
    steps: Vec<Step>,
    out: SampleType,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expr")
            .field("text", &self.text)
            .field("out", &self.out)
            .finish()
    }
}

/// Checks an argument count; `what` is "fetch method 'x'" or "converter 'x'".
fn check_count(what: &str, got: usize, min: usize, max: usize) -> Result<(), String> {
    if got < min {
        Err(format!("{what} : missing arguments (got {got}/{min})"))
    } else if got > max {
        Err(format!(
            "{what} : too many arguments (got {got}, at most {max})"
        ))
    } else {
        Ok(())
    }
}

impl Expr {
    /// Compiles `text`, the expression as the configuration lexer left it.
    ///
    /// Rejects: quoting errors ("missing comma after fetch keyword 'str'"), an unknown
    /// keyword ("unknown fetch method 'foo'", "unknown converter 'foo'"), a wrong number of
    /// arguments ("fetch method 'str' : missing arguments (got 0/1)"), an argument of the
    /// wrong type ("fetch method 'int' : failed to parse 'x' as type 'integer' at position
    /// 1"), a converter whose input cannot be cast from the type on its left ("converter
    /// 'lower' cannot be applied to type 'ip' (it takes 'string')"), an invalid regex, an
    /// unreadable or malformed map file. Map files are loaded through `maps`.
    pub fn parse(text: &str, maps: &MapStore) -> Result<Expr, String> {
        Expr::from_calls(text, split_chain(text)?, maps)
    }

    /// Compiles already split keywords (the ACL parser renames ACL-only keywords first).
    pub(crate) fn from_calls(
        text: &str,
        calls: Vec<Call>,
        maps: &MapStore,
    ) -> Result<Expr, String> {
        let Some((first, convs)) = calls.split_first() else {
            return Err("missing fetch method".to_string());
        };
        let def = fetch::lookup(&first.name)
            .ok_or_else(|| format!("unknown fetch method '{}'", first.name))?;
        let what = format!("fetch method '{}'", first.name);
        let args = first.normalized(def.min_args);
        check_count(&what, args.len(), def.min_args, def.max_args)?;
        let mut fetch = (def.build)(def, &args).map_err(|e| format!("{what} : {e}"))?;
        fetch.resolve(maps).map_err(|e| format!("{what} : {e}"))?;
        let mut ty = def.out;
        let mut steps = Vec::with_capacity(convs.len());
        for call in convs {
            let cdef = conv::lookup(&call.name)
                .ok_or_else(|| format!("unknown converter '{}'", call.name))?;
            let what = format!("converter '{}'", call.name);
            let args = call.normalized(cdef.min_args);
            check_count(&what, args.len(), cdef.min_args, cdef.max_args)?;
            if let Some(input) = cdef.input
                && !ty.can_cast_to(input)
            {
                return Err(format!(
                    "{what} cannot be applied to type '{ty}' (it takes '{input}')"
                ));
            }
            let build = ConvBuild {
                name: &call.name,
                args: &args,
                input: ty,
                maps,
            };
            let built = (cdef.build)(&build).map_err(|e| format!("{what} : {e}"))?;
            steps.push(Step {
                input: cdef.input,
                conv: built.conv,
            });
            ty = built.out;
        }
        Ok(Expr {
            text: text.to_string(),
            fetch_name: first.name.clone(),
            fetch,
            source: def.source,
            steps,
            out: ty,
        })
    }

    /// The expression as it was written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The fetch keyword.
    pub fn fetch_name(&self) -> &str {
        &self.fetch_name
    }

    /// True if at least one converter follows the fetch.
    pub fn has_converters(&self) -> bool {
        !self.steps.is_empty()
    }

    /// The type of the samples the expression produces.
    pub fn out_type(&self) -> SampleType {
        self.out
    }

    /// The data the fetch reads.
    pub fn source(&self) -> Source {
        self.source
    }

    /// The stages where the expression can produce a sample: those of its fetch
    /// (converters read no stream data).
    pub fn stages(&self) -> Stages {
        self.source.stages()
    }

    /// Checks that the expression can produce a sample at one of the stages `where_` (a
    /// rule of a `listen` section runs at its frontend's and its backend's stages; one is
    /// enough). The error is HAProxy's: "fetch method 'res.hdr' extracts information from
    /// 'HTTP response headers', none of which is available here".
    ///
    /// The bare `hdr` fetch reads the message being handled (configuration.txt §7.3.6
    /// "hdr": `req.hdr` on requests, `res.hdr` on responses), as does the deprecated
    /// `cookie` (`req.cook`, `res.cook`): where no request header is available but response
    /// headers are (`http-response`, `http-after-response`, `stick store-response`), it is
    /// settled here to read the response's.
    pub fn check_stages(&mut self, where_: Stages) -> Result<(), String> {
        if matches!(self.fetch_name.as_str(), "hdr" | "cookie")
            && !self.stages().intersects(where_)
            && Source::ResponseHeaders.stages().intersects(where_)
        {
            self.fetch.read_response_side();
            self.source = Source::ResponseHeaders;
        }
        if self.stages().intersects(where_) {
            Ok(())
        } else {
            Err(format!(
                "fetch method '{}' extracts information from '{}', none of which is available here",
                self.fetch_name,
                self.source.name()
            ))
        }
    }

    /// The sample: the fetch's value (the last occurrence for multi-valued fetches, unless
    /// an occurrence was given) through every converter. `None` when the fetch finds
    /// nothing or a converter fails.
    pub fn eval<'a>(&'a self, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        let mut first = None;
        self.fetch.run(ctx, false, &mut |s| {
            first = Some(s);
            true
        });
        self.convert(first?, ctx)
    }

    /// Hands `f` every value of the fetch (all occurrences of a header, all cookies of a
    /// name...) through the converters, skipping values a converter fails on, until `f`
    /// returns true. Returns true if `f` did. This is how an ACL tests each occurrence.
    pub fn eval_each<'a>(
        &'a self,
        ctx: &'a dyn Context,
        f: &mut dyn FnMut(Sample<'a>) -> bool,
    ) -> bool {
        self.fetch
            .run(ctx, true, &mut |s| match self.convert(s, ctx) {
                Some(converted) => f(converted),
                None => false,
            })
    }

    fn convert<'a>(&'a self, mut sample: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        for step in &self.steps {
            if let Some(input) = step.input {
                sample = sample.cast(input)?;
            }
            sample = step.conv.convert(sample, ctx)?;
        }
        Some(sample)
    }
}

#[cfg(test)]
mod tests;
