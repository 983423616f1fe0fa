package meteor

import "strings"

// DefaultFunctionWords is the English function-word list this package uses
// for METEOR's content/function weighting (δ). The jar ships its own list
// (function/english.words, frequent words of a large corpus) which is not
// available here; this one is written for radgen: English closed-class words
// (articles, determiners, pronouns, prepositions, conjunctions, auxiliaries
// and modals, common particles) and punctuation tokens. Replace it with
// [WithFunctionWords] to use the jar's list.
var DefaultFunctionWords = strings.Fields(`
. , ; : ! ? ' " ( ) [ ] { } - -- ... / & % $ # @ * + = < > ` + "`" + ` 's 're 've 'll 'd 'm n't
a an the this that these those some any each every either neither no all both
half several many much more most few fewer less least other another such what
which whichever whatever who whom whose whoever
i me my mine myself we us our ours ourselves you your yours yourself
yourselves he him his himself she her hers herself it its itself they them
their theirs themselves one ones oneself someone somebody something anyone
anybody anything everyone everybody everything nobody nothing none
about above across after against along amid among amongst around as at
before behind below beneath beside besides between beyond but by despite
down during except for from in inside into like near of off on onto out
outside over past per since than through throughout till to toward towards
under underneath unlike until up upon via with within without
and or nor so yet if then else because although though while whereas
unless whether once where when whenever wherever how why
be am is are was were been being have has had having do does did doing done
will would shall should can could may might must ought
not n't also just only even still already again too very quite rather
there here now then thus hence however therefore
'`)

func functionWordSet(words []string) map[string]struct{} {
	m := make(map[string]struct{}, len(words))
	for _, w := range words {
		m[strings.ToLower(w)] = struct{}{}
	}
	return m
}
