package chexpert

import (
	"regexp"
	"regexp/syntax"
	"strings"
)

// The surface rules. Each rule is a trigger phrase that negates or makes
// uncertain a mention within a few words before it (after = false) or after
// it (after = true), NegEx style. They are derived from the CheXpert
// labeler's three Semgrex pattern files, in its order of precedence:
//
//  1. pre_negation_uncertainty.txt: rules that must win over negation
//     ("cannot exclude X", "no new X");
//  2. negation.txt ("no X", "without X", "X is normal", "X has resolved", ...);
//  3. post_negation_uncertainty.txt ("possible X", "may represent X",
//     "X or Y", "stable heart size", ...).
//
// A mention matched by no rule is positive. The comment on each rule quotes
// the pattern-file comment or pattern it stands for.

type ruleClass uint8

const (
	preNegUncertain ruleClass = iota
	negation
	postNegUncertain
	pseudo // looks like a trigger but is not; hides triggers inside it
)

type rule struct {
	keys   []string // a match contains one of these (prefilter); nil: no filter
	name   string
	comma  bool // a comma between mention and trigger stops the rule
	class  ruleClass
	after  bool           // trigger follows the mention
	maxGap int            // words allowed between trigger and mention
	re     *regexp.Regexp // trigger, matched on " w1 w2 ... wn "
	only   *regexp.Regexp // if set, the mention text must match
}

// Shared alternations.
const (
	copula   = `(?:is|are|was|were|be|been|appears?|appeared|remains?|remained|looks?|seems?)`
	adverbs  = `(?: (?:now|otherwise|again|grossly|essentially|overall|still|also|currently|largely|both|all|and|unchanged|stable|likely))*`
	seenVerb = `(?:(?:significantly|definitely|substantially|markedly|appreciably|grossly) )?(?:seen|identified|visuali[sz]ed|demonstrated|present|evident|enlarged|noted|detected|appreciable|definitely seen)`
	normal   = `(?:normal|unremarkable|within (?:the )?normal limits|within (?:the )?limits of normal|(?:at |within )?(?:the )?upper limits? of normal)`
	// Heads of the "stable silhouette" rules of post_negation_uncertainty.txt.
	cardioHeads = `cardiomediastinal|pericardial|mediastinal|mediastinum|cardiomediastinum|contour|configuration|silhouette|size|heart|shadow`
)

func r(name string, class ruleClass, after bool, maxGap int, pattern string) rule {
	full := ` (?:` + pattern + `)`
	re := regexp.MustCompile(full)
	re.Longest()
	return rule{name: name, class: class, after: after, maxGap: maxGap, re: re, keys: requiredLiterals(full)}
}

// requiredLiterals returns strings of which every match of pattern contains
// at least one, or nil when it cannot tell. Rules whose keys are all absent
// from a sentence are not run: most sentences hold few trigger words.
func requiredLiterals(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	return required(re.Simplify())
}

func required(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || strings.TrimSpace(string(re.Rune)) == "" {
			return nil // spaces are in every sentence: no information
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpCharClass:
		// A small class: one of its characters.
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for c := re.Rune[i]; c <= re.Rune[i+1]; c++ {
				if len(out) == 8 {
					return nil
				}
				out = append(out, string(c))
			}
		}
		return out
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		// Any child's requirement holds for the whole; take the one whose
		// shortest literal is longest.
		var best []string
		bestLen := 0
		for _, sub := range re.Sub {
			req := required(sub)
			if req == nil {
				continue
			}
			short := len(req[0])
			for _, l := range req {
				short = min(short, len(l))
			}
			if short > bestLen {
				best, bestLen = req, short
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			req := required(sub)
			if req == nil {
				return nil
			}
			all = append(all, req...)
		}
		return all
	}
	return nil
}

func (ru rule) stopAtComma() rule {
	ru.comma = true
	return ru
}

func (ru rule) onlyFor(pattern string) rule {
	ru.only = regexp.MustCompile(pattern)
	return ru
}

var rules = []rule{
	// --- pseudo-triggers: not negations (NegEx's pseudo list, adapted).
	r("pseudo", pseudo, false, 0, `no (?:significant |definite |suspicious |interval )?(?:change|increase)|not only|not necessarily|gram negative|without (?:significant )?(?:change|difficulty)|not (?:well|clearly)`),

	// --- 1. pre_negation_uncertainty.txt
	// "cannot exclude some XXX", "cannot rule out XXX"
	r("cannot exclude", preNegUncertain, false, 8, `(?:cannot|can not|could not|not) (?:be )?(?:excluded?|ruled? out|rule-out)`),
	// "no evidence to rule out XXX"
	r("no evidence to rule out", preNegUncertain, false, 8, `(?:no evidence|nothing) to rule out`),
	// "XXX is not excluded"
	r("not excluded", preNegUncertain, true, 6, `(?:`+copula+` )?(?:cannot|can not|could not|may not|not) (?:be )?(?:excluded|ruled out)`),
	// "no new XXX", "no new area of XXX"
	r("no new", preNegUncertain, false, 6, `no (?:\S+ )?new`),

	// --- 2. negation.txt
	// "no XXX / general negative case", "no definite XXX", "no obvious XXX",
	// "no evidence of XXX", "no focus of XXX", "no area of XXX"
	r("no", negation, false, 10, `no|nor|without|negative for|free of|clear of|rather than|never`),
	// "XXX is not enlarged", "not ... XXX"
	r("not", negation, false, 3, `not`),
	// "there is no NN to suggest/explain XXX", "no NN to suggest/explain XXX"
	r("no NN to suggest", negation, false, 4, `no (?:\S+ ){1,8}?to (?:suggest|explain|diagnose)`),
	// "removal of XXX", history/free/disappearance/resolution/drainage of
	r("resolution of", negation, false, 6, `(?:history|disappearance|resolution|drainage|removal|clearing|absence) of`),
	// "rule out XXX" (nmod:out rule), "exclude XXX"
	r("ruled out", negation, false, 6, `(?:rules?|ruled) out|excluded?`),
	// "normal/unremarkable XXX", "normal/unremarkable appearance of XXX"
	r("normal", negation, false, 4, `normal|unremarkable`),
	// "XXX is/appears/remains (now, otherwise) normal/unremarkable/within
	// normal limits", "XXX at upper limits of normal", "XXX is not enlarged",
	// "XXX is no longer seen", "XXX is absent", "XXX has resolved"
	r("X is normal/absent/not seen", negation, true, 6, copula+adverbs+` (?:`+normal+`|absent|resolved|cleared|removed|excluded|ruled out|not `+seenVerb+`|no longer (?:be )?`+seenVerb+`)`),
	r("normal (no verb)", negation, true, 4, normal).stopAtComma(),
	r("not seen", negation, true, 4, `(?:not|no longer) `+seenVerb),
	// "XXX has resolved", "XXX has/have cleared", "XXX removed"
	r("resolved", negation, true, 3, `(?:(?:has|have) (?:\S+ )?(?:been )?)?(?:resolved|cleared|removed)`),
	// "XXX is absent" without a verb, "XXX with interval resolution"
	r("absent", negation, true, 3, `absent|(?:with )?interval resolution`),

	// --- 3. post_negation_uncertainty.txt
	// "possible/possibly/presumably/probable/questionable/suspect(ed)/suspicious XXX",
	// "question/suggestion of XXX", "concern/suspicion for XXX", "worrisome for",
	// "may/might/would/could be XXX", "may/could represent XXX", "cannot",
	// "differential diagnosis includes", "consider/favor XXX",
	// "secondary to XXX", "compatible with XXX", "correlate clinically for XXX",
	// "less likely"
	r("possible", postNegUncertain, false, 6, `possible|possibly|presumably|probable|questionable|questioned|question of|suspect|suspected|suspicious(?: for| of)?|suspicion (?:for|of)|concern(?:ing)? for|worrisome for|suggestion of|may|might|would|could|cannot|differential(?: diagnosis)?(?: includes?)?|consider(?:ed|ing)?|favou?r(?:ed)?|secondary to|compatible with|correlate clinically for|clinical correlation for|correlation for|less likely|versus|vs`),
	// "XXX could/might/may/possibly be present", "XXX could appear",
	// "XXX suspected", "XXX is possible", "XXX is poorly/incompletely
	// evaluated", "XXX is not well visualized", "XXX are not clearly seen",
	// "XXX was not appreciated", "XXX versus YYY"
	r("is possible", postNegUncertain, true, 4, `(?:`+copula+` )?(?:possible|suspected|questioned|questionable|considered|favou?red|(?:poorly|incompletely) (?:evaluated|visuali[sz]ed|seen)|not (?:well|clearly) (?:evaluated|visuali[sz]ed|seen)|not appreciated|less likely)|may|might|could|would|can|possibly|versus|vs`),
	// "XXX or YYY" (conj:or), "and/or" (cleaned to "or")
	r("or", postNegUncertain, false, 2, `or`),
	r("or", postNegUncertain, true, 2, `or`),
	// "obscuring the XXX | XXX is obscured | obscured XXX"
	r("obscured", postNegUncertain, false, 3, `obscur\S*`),
	r("obscured", postNegUncertain, true, 3, `(?:`+copula+` )?obscur\S*`),
	// "borderline heart size"
	r("borderline", postNegUncertain, false, 2, `borderline`).onlyFor(`heart|cardi`),
	// "Stable/unchanged silhouette/cardiomediastinal", "... is stable|unchanged|not
	// changed", "... similar to prior", "stable appearance of ..."
	r("stable silhouette", postNegUncertain, false, 3, `stable|unchanged|(?:stable )?appearance of`).onlyFor(cardioHeads),
	r("silhouette is stable", postNegUncertain, true, 6, `(?:`+copula+adverbs+` )?(?:stable|unchanged|not changed|without change|(?:grossly )?similar(?: to (?:the )?(?:prior|previous)(?: \S+)?)?)`).onlyFor(cardioHeads),
}

// alwaysUncertain are mentions post_negation_uncertainty.txt makes
// uncertain by themselves (unless negated first).
var alwaysUncertain = map[string]bool{
	"vascular congestion": true, "pulmonary congestion": true,
	"indistinctness": true, "vascular prominence": true,
}

// terminators end a rule's scope: a trigger does not reach a mention across them.
var terminators = map[string]bool{
	"but": true, "however": true, "although": true, "though": true, "except": true,
	"aside": true, "apart": true, "which": true, "whereas": true, "while": true,
	"yet": true, "with": true, ";": true, ":": true, "(": true, ")": true,
}

// clauseVerbs also end the scope of a trigger before the mention: in
// "no effusion and the heart is enlarged" the "no" does not reach "the heart".
var clauseVerbs = map[string]bool{
	"is": true, "are": true, "was": true, "were": true, "has": true, "have": true,
	"had": true, "appears": true, "appear": true, "remains": true, "remain": true,
	"demonstrates": true, "shows": true,
}

// trigger is one rule match in a sentence, as a token span.
type trigger struct {
	rule       *rule
	first, end int // tokens [first, end)
}

// sentenceTriggers finds every rule's triggers in a tokenised sentence.
func sentenceTriggers(toks []token) []trigger {
	var b strings.Builder
	b.WriteByte(' ')
	starts := make([]int, len(toks)+1) // offset of token k in the joined string
	for k, t := range toks {
		starts[k] = b.Len()
		b.WriteString(t.text)
		b.WriteByte(' ')
	}
	starts[len(toks)] = b.Len()
	s := b.String()
	tokAt := func(off int) int { // token index starting at off, or -1
		for k, st := range starts {
			if st == off {
				return k
			}
			if st > off {
				break
			}
		}
		return -1
	}
	var all, pseudos []trigger
	for i := range rules {
		ru := &rules[i]
		if ru.keys != nil && !containsAny(s, ru.keys) {
			continue
		}
		for _, loc := range ru.re.FindAllStringIndex(s, -1) {
			// The match is " w1 ... wk"; it must end at a token boundary.
			if loc[1] >= len(s) || s[loc[1]] != ' ' {
				continue
			}
			first := tokAt(loc[0] + 1)
			end := tokAt(loc[1] + 1)
			if first < 0 || end < 0 || end <= first {
				continue
			}
			tr := trigger{rule: ru, first: first, end: end}
			if ru.class == pseudo {
				pseudos = append(pseudos, tr)
			} else {
				all = append(all, tr)
			}
		}
	}
	// Drop triggers inside a pseudo-trigger.
	out := all[:0]
	for _, tr := range all {
		hidden := false
		for _, p := range pseudos {
			if tr.first >= p.first && tr.end <= p.end {
				hidden = true
				break
			}
		}
		if !hidden {
			out = append(out, tr)
		}
	}
	return out
}

// classify decides a mention's label with the rules, in the labeler's order
// of precedence, and names the rule that decided.
func classify(toks []token, trs []trigger, m Mention) (Label, string) {
	// Token span of the mention.
	first, last := -1, -1
	for k, t := range toks {
		if t.end > m.Start && t.start < m.End {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 {
		return Positive, ""
	}
	text := m.Text()
	inScope := func(tr trigger) bool {
		ru := tr.rule
		if ru.only != nil && !ru.only.MatchString(text) {
			return false
		}
		var lo, hi int // gap tokens [lo, hi)
		if ru.after {
			if tr.first <= last {
				return false
			}
			lo, hi = last+1, tr.first
		} else {
			if tr.end > first {
				return false
			}
			lo, hi = tr.end, first
		}
		conj := false
		words := 0 // commas do not count towards the gap
		for k := lo; k < hi; k++ {
			w := toks[k].text
			if terminators[w] || (!ru.after && clauseVerbs[w]) || (ru.comma && w == ",") {
				return false
			}
			if w != "," {
				words++
			}
			conj = conj || w == "and"
		}
		if words > ru.maxGap {
			return false
		}
		// "no X and Y is ...": Y is the subject of a new clause.
		if !ru.after && conj && last+1 < len(toks) && clauseVerbs[toks[last+1].text] {
			return false
		}
		return true
	}
	find := func(class ruleClass) string {
		for _, tr := range trs {
			if tr.rule.class == class && inScope(tr) {
				return tr.rule.name
			}
		}
		return ""
	}
	if name := find(preNegUncertain); name != "" {
		return Uncertain, name
	}
	if name := find(negation); name != "" {
		return Negative, name
	}
	if alwaysUncertain[text] {
		return Uncertain, "congestion/indistinctness/prominence"
	}
	if name := find(postNegUncertain); name != "" {
		return Uncertain, name
	}
	return Positive, ""
}

func containsAny(s string, keys []string) bool {
	for _, k := range keys {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}
