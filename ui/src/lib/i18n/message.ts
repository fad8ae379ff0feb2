// The shape of a catalog: each message is an ICU MessageFormat string, read by FormatJS's
// intl-messageformat: `{name}` is a parameter, `{count, plural, one {…} other {# …}}` a plural
// whose forms are Intl.PluralRules' categories for the language (`#` is the count, written for
// the language), `{kind, select, a {…} other {…}}` a choice.
export type Catalog = Record<string, string>;
