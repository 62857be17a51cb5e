//! Hand-written argument parsing: `--name value`, `--name=value` and bare `--flag`s, each
//! command declaring which names it accepts; anything else is a usage error.

use std::collections::HashMap;

/// A usage error: printed with the usage text, exit status 2.
#[derive(Debug)]
pub struct Usage(pub String);

pub struct Args {
    values: HashMap<&'static str, String>,
}

impl Args {
    /// Parse `args` against the accepted option names (`with_value`: options taking a value;
    /// `flags`: options without one).
    pub fn parse(args: &[String], with_value: &[&'static str], flags: &[&'static str]) -> Result<Args, Usage> {
        let mut values = HashMap::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let Some(body) = a.strip_prefix("--") else {
                return Err(Usage(format!("unexpected argument {a:?} (options start with --)")));
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            if let Some(&n) = with_value.iter().find(|&&n| n == name) {
                let v = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        args.get(i).cloned().ok_or_else(|| Usage(format!("--{n} needs a value")))?
                    }
                };
                if values.insert(n, v).is_some() {
                    return Err(Usage(format!("--{n} given twice")));
                }
            } else if let Some(&n) = flags.iter().find(|&&n| n == name) {
                if inline.is_some() {
                    return Err(Usage(format!("--{n} takes no value")));
                }
                values.insert(n, String::new());
            } else {
                return Err(Usage(format!("unknown option --{name}")));
            }
            i += 1;
        }
        Ok(Args { values })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|s| s.as_str())
    }

    pub fn flag(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The value of `name`, which must be one of `choices`.
    pub fn choice(&self, name: &str, choices: &[&'static str]) -> Result<Option<&'static str>, Usage> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => choices
                .iter()
                .find(|&&c| c == v)
                .map(|&c| Some(c))
                .ok_or_else(|| Usage(format!("--{name} {v:?}: expected one of {}", choices.join(", ")))),
        }
    }

    pub fn number(&self, name: &str) -> Result<Option<usize>, Usage> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| Usage(format!("--{name} {v:?}: expected a non-negative integer"))),
        }
    }
}
