/* make_corpus: writes the bundled training corpus, English-like text from a small grammar,
 * deterministically (the same bytes on every machine), so dtrain trains out of the box with no
 * download. The text is the project's own; it has structure at every scale a small model can
 * learn: spelling, word order, punctuation and recurring phrases. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x243f6a8885a308d3ull;
static unsigned pick(unsigned n)
{
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((state >> 33) % n);
}

#define N(a) (sizeof(a) / sizeof(a[0]))
static const char *det[] = {"the", "a", "every", "one", "that", "this", "each", "no"};
static const char *adj[] = {"small", "large", "quiet", "busy", "slow", "fast", "old", "new", "bright", "cold",
                            "warm", "patient", "careful", "distant", "hidden", "open", "narrow", "heavy"};
static const char *noun[] = {"river", "machine", "garden", "teacher", "engine", "window", "village", "letter",
                             "cluster", "student", "mountain", "bridge", "signal", "kitchen", "harbor", "forest",
                             "network", "clock", "library", "painter", "market", "lantern", "switch", "farmer"};
static const char *verb[] = {"watches", "carries", "finds", "builds", "follows", "remembers", "opens", "crosses",
                             "measures", "repairs", "sends", "waits for", "answers", "counts", "moves", "keeps"};
static const char *adv[] = {"every morning", "before the rain", "after the long night", "without a sound",
                            "in the evening", "near the old road", "at the end of the day", "once a year",
                            "when the bell rings", "while the others sleep", "on the second floor", "by hand"};
static const char *conj[] = {"and", "but", "so", "because", "while"};

static void noun_phrase(FILE *f)
{
    fprintf(f, "%s ", det[pick(N(det))]);
    if (pick(2))
        fprintf(f, "%s ", adj[pick(N(adj))]);
    fprintf(f, "%s", noun[pick(N(noun))]);
}

static void clause(FILE *f)
{
    noun_phrase(f);
    fprintf(f, " %s ", verb[pick(N(verb))]);
    noun_phrase(f);
    if (pick(3) == 0)
        fprintf(f, " %s", adv[pick(N(adv))]);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_corpus OUT.txt BYTES\n");
        return 2;
    }
    long target = atol(argv[2]);
    FILE *f = fopen(argv[1], "w");
    if (!f || target <= 0) {
        fprintf(stderr, "make_corpus: cannot write %s or bad size\n", argv[1]);
        return 2;
    }
    long sentences = 0;
    while (ftell(f) < target) {
        clause(f);
        if (pick(3) == 0) {
            fprintf(f, " %s ", conj[pick(N(conj))]);
            clause(f);
        }
        fprintf(f, ".%s", ++sentences % 6 == 0 ? "\n\n" : " ");
    }
    fputc('\n', f);
    return fclose(f) == 0 ? 0 : 1;
}
