//! Integer, boolean and address converters (configuration.txt §7.3.1): `add`, `sub`, `mul`,
//! `div`, `mod`, `and`, `or`, `xor`, `neg`, `cpl`, `bool`, `not`, `odd`, `even`, `ipmask`.
//!
//! Arithmetic saturates instead of wrapping (the manual says so for `mul`; the others follow
//! it), `div` by zero gives the largest integer and `mod` by zero gives zero. The operand
//! may be a variable, read when the converter runs; a missing variable fails the sample.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{Built, ConvBuild, Convert, IntOrVar, Table, def, into_int};
use crate::args::{bad_arg, str_arg};
use crate::context::Context;
use crate::value::{Sample, SampleType};

const INT: Option<SampleType> = Some(SampleType::Int);

/// A binary operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
}

/// A compiled integer converter.
#[derive(Debug)]
enum Arith {
    Binary(Op, IntOrVar),
    Neg,
    Cpl,
    Bool,
    Not,
    Odd,
    Even,
}

impl Convert for Arith {
    fn convert<'a>(&'a self, input: Sample<'a>, ctx: &'a dyn Context) -> Option<Sample<'a>> {
        let x = into_int(&input)?;
        Some(match self {
            Arith::Binary(op, operand) => {
                let y = operand.get(ctx)?;
                Sample::Int(match op {
                    Op::Add => x.saturating_add(y),
                    Op::Sub => x.saturating_sub(y),
                    Op::Mul => x.saturating_mul(y),
                    Op::Div if y == 0 => i64::MAX,
                    Op::Div => x.checked_div(y).unwrap_or(i64::MAX),
                    Op::Mod => x.checked_rem(y).unwrap_or(0),
                    Op::And => x & y,
                    Op::Or => x | y,
                    Op::Xor => x ^ y,
                })
            }
            // The opposite of the smallest integer does not fit: it saturates, as in HAProxy.
            Arith::Neg => Sample::Int(x.checked_neg().unwrap_or(i64::MAX)),
            Arith::Cpl => Sample::Int(!x),
            Arith::Bool => Sample::Bool(x != 0),
            Arith::Not => Sample::Bool(x == 0),
            Arith::Odd => Sample::Bool(x & 1 == 1),
            Arith::Even => Sample::Bool(x & 1 == 0),
        })
    }
}

/// `ipmask(mask4[,mask6])`.
#[derive(Debug)]
struct IpMask {
    v4: u32,
    v6: Option<u128>,
}

impl Convert for IpMask {
    fn convert<'a>(&'a self, input: Sample<'a>, _: &'a dyn Context) -> Option<Sample<'a>> {
        match input {
            Sample::Ip(IpAddr::V4(a)) => Some(Sample::Ip(IpAddr::V4(Ipv4Addr::from(
                u32::from(a) & self.v4,
            )))),
            // Without a mask6, IPv6 addresses fail, as the manual says.
            Sample::Ip(IpAddr::V6(a)) => {
                let mask = self.v6?;
                Some(Sample::Ip(IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))))
            }
            _ => None,
        }
    }
}

/// An IPv4 mask: a prefix length (`24`) or a dotted mask (`255.255.255.0`).
pub(crate) fn parse_mask4(text: &str) -> Option<u32> {
    if text.contains('.') {
        return text.parse::<Ipv4Addr>().ok().map(u32::from);
    }
    let bits: u32 = text.parse().ok().filter(|b| *b <= 32)?;
    Some(u32::MAX.checked_shl(32 - bits).unwrap_or(0))
}

/// An IPv6 mask: a prefix length (`64`) or an address-shaped mask (`ffff:ffff::`).
pub(crate) fn parse_mask6(text: &str) -> Option<u128> {
    if text.contains(':') {
        return text.parse::<Ipv6Addr>().ok().map(u128::from);
    }
    let bits: u32 = text.parse().ok().filter(|b| *b <= 128)?;
    Some(u128::MAX.checked_shl(128 - bits).unwrap_or(0))
}

fn build(b: &ConvBuild<'_>) -> Result<Built, String> {
    let int_out = |a: Arith| Built::new(a, SampleType::Int);
    let bool_out = |a: Arith| Built::new(a, SampleType::Bool);
    let op = match b.name {
        "add" => Op::Add,
        "sub" => Op::Sub,
        "mul" => Op::Mul,
        "div" => Op::Div,
        "mod" => Op::Mod,
        "and" => Op::And,
        "or" => Op::Or,
        "xor" => Op::Xor,
        "neg" => return int_out(Arith::Neg),
        "cpl" => return int_out(Arith::Cpl),
        "bool" => return bool_out(Arith::Bool),
        "not" => return bool_out(Arith::Not),
        "odd" => return bool_out(Arith::Odd),
        "even" => return bool_out(Arith::Even),
        _ => {
            let text4 = str_arg(b.args, 0).unwrap_or("");
            let v4 = parse_mask4(text4).ok_or_else(|| bad_arg(text4, "IPv4 mask", 0))?;
            let v6 = match str_arg(b.args, 1) {
                None => None,
                Some(text6) => {
                    Some(parse_mask6(text6).ok_or_else(|| bad_arg(text6, "IPv6 mask", 1))?)
                }
            };
            return Built::new(IpMask { v4, v6 }, SampleType::Ip);
        }
    };
    let operand = IntOrVar::parse(str_arg(b.args, 0).unwrap_or(""), 0)?;
    int_out(Arith::Binary(op, operand))
}

/// The integer converters.
pub(super) static CONVERTERS: Table = &[
    ("add", def(1, 1, INT, build)),
    ("sub", def(1, 1, INT, build)),
    ("mul", def(1, 1, INT, build)),
    ("div", def(1, 1, INT, build)),
    ("mod", def(1, 1, INT, build)),
    ("and", def(1, 1, INT, build)),
    ("or", def(1, 1, INT, build)),
    ("xor", def(1, 1, INT, build)),
    ("neg", def(0, 0, INT, build)),
    ("cpl", def(0, 0, INT, build)),
    ("bool", def(0, 0, INT, build)),
    ("not", def(0, 0, INT, build)),
    ("odd", def(0, 0, INT, build)),
    ("even", def(0, 0, INT, build)),
    ("ipmask", def(1, 2, Some(SampleType::Ip), build)),
];
