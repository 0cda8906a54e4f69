/* The mixture-of-experts router against routings worked out by hand (engine/gpt_moe.c): each
 * token's top K experts by logit (the lower index first among equals), their weights a softmax
 * over those K logits, the capacity ceil(cf N K / E) per expert keeping its highest weights
 * (Megatron-Core's drop policy "probs"), rows grouped by expert in token order, and the choices
 * counted before any drop (what the load-balancing loss sees); under expert parallelism, the
 * rows each EP rank's experts receive and the balance (the busiest rank's over the mean) of two
 * ranks with known routings, each rank a thread. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "gpt.h"
#include "gpt_internal.h"

enum { N = 7, E = 4, K = 2 };

/* Expert 0 leads for six of the seven tokens; token 6 ties all four experts. */
static const float LOGITS[N][E] = {
    {5, 4, 0, 0}, {5, 0, 3, 0}, {5, 0, 0, 1}, {2, 1.5f, 0, 0}, {3, 0, 0, 2.9f}, {0, 1, 2, 0}, {1, 1, 1, 1},
};

static gpt_moe_route *routed(double capacity_factor, gpt_model *m, int *rows)
{
    memset(m, 0, sizeof *m);
    m->cfg = (gpt_config){.num_layers = 1, .hidden = 8, .heads = 1, .seq_len = N, .vocab = 2, .num_experts = E,
                          .moe_topk = K, .moe_capacity_factor = capacity_factor};
    m->B = 1;
    m->T = N;
    gpt_moe_route *r = gpt_moe_route_alloc(m);
    *rows = gpt_moe_route_tokens(m, &LOGITS[0][0], r);
    return r;
}

static double pair_weight(double a, double b) /* the first of two logits' softmax */
{
    return 1.0 / (1.0 + exp(b - a));
}

static void top_k_and_weights(void **state)
{
    (void)state;
    gpt_model m;
    int rows;
    gpt_moe_route *r = routed(0, &m, &rows);
    static const int pick[N][K] = {{0, 1}, {0, 2}, {0, 3}, {0, 1}, {0, 3}, {2, 1}, {0, 1}};
    for (int t = 0; t < N; t++)
        for (int j = 0; j < K; j++) {
            assert_int_equal(r->expert[t * K + j], pick[t][j]);
            double w = pair_weight(LOGITS[t][pick[t][j]], LOGITS[t][pick[t][1 - j]]);
            assert_true(fabs(r->prob[t * K + j] - w) < 1e-6);
        }
    /* the softmax over all four, for the load-balancing loss: token 0 */
    double z = exp(5) + exp(4) + 2;
    assert_true(fabs(r->scores[0] - exp(5) / z) < 1e-6 && fabs(r->scores[2] - 1 / z) < 1e-6);
    /* dropless: every choice has a row; expert 0 holds tokens 0-4 and 6 in token order */
    assert_int_equal(rows, N * K);
    static const int offset[E + 1] = {0, 6, 10, 12, 14};
    assert_memory_equal(r->offset, offset, sizeof offset);
    static const int expert0[6] = {0, 1, 2, 3, 4, 6};
    assert_memory_equal(r->token, expert0, sizeof expert0);
    gpt_moe_route_free(r);
}

static void capacity_drops_the_lowest_weights(void **state)
{
    (void)state;
    gpt_model m;
    int rows;
    gpt_moe_route *r = routed(1.0, &m, &rows); /* capacity ceil(7 x 2 / 4) = 4 */
    /* expert 0's six choices by weight: tokens 2 (.982), 1 (.881), 0 (.731), 3 (.622), 4 (.525),
     * 6 (.5): the last two dropped; expert 1 has four (tokens 0, 3, 5, 6), experts 2 and 3 two */
    static const int offset[E + 1] = {0, 4, 8, 10, 12};
    assert_int_equal(rows, 12);
    assert_memory_equal(r->offset, offset, sizeof offset);
    static const int tokens[12] = {0, 1, 2, 3, 0, 3, 5, 6, 1, 5, 2, 4};
    assert_memory_equal(r->token, tokens, sizeof tokens);
    assert_int_equal(r->row[4 * K + 0], -1); /* token 4's expert 0 */
    assert_int_equal(r->row[6 * K + 0], -1); /* token 6's expert 0 */
    assert_int_equal(r->row[4 * K + 1], 11); /* token 4's expert 3: the last row */
    static const int counts[E] = {6, 4, 2, 2}; /* before the drops */
    assert_memory_equal(r->counts, counts, sizeof counts);
    gpt_moe_route_free(r);
    /* a capacity of half the even share: ceil(0.5 x 7 x 2 / 4) = 2 per expert */
    r = routed(0.5, &m, &rows);
    assert_int_equal(rows, 8);
    /* expert 0: tokens 2 and 1; expert 1: tokens 6 (.5) and 3 (.378) over 0 and 5 (.269 each);
     * experts 2 and 3 both of theirs; each expert's rows in token order */
    static const int half[8] = {1, 2, 3, 6, 1, 5, 2, 4};
    assert_memory_equal(r->token, half, sizeof half);
    gpt_moe_route_free(r);
}

/* Expert parallelism over two threads: an all-to-all of ints between them (n from each to each). */
typedef struct {
    pthread_barrier_t *meet;
    const int **posted; /* each rank's send buffer, while the exchange runs */
    int rank;
} thread_ep;

static void threads_alltoall_int(const int *send, int *recv, size_t n, void *ctx)
{
    thread_ep *t = ctx;
    t->posted[t->rank] = send;
    pthread_barrier_wait(t->meet);
    for (int s = 0; s < 2; s++)
        memcpy(recv + (size_t)s * n, t->posted[s] + (size_t)t->rank * n, n * sizeof(int));
    pthread_barrier_wait(t->meet); /* both have read before either's buffer goes */
}

/* Rank 1's tokens all choose experts 3 and 2 (rank 0's are LOGITS). */
static const float LOGITS1[N][E] = {
    {0, 0, 1, 2}, {0, 0, 1, 2}, {0, 0, 1, 2}, {0, 0, 1, 2}, {0, 0, 1, 2}, {0, 0, 1, 2}, {0, 0, 1, 2},
};

typedef struct {
    thread_ep ep;
    double capacity_factor;
    int rows;           /* the rows this rank's experts run */
    int xoffset[E / 2 + 1];
    double balance;
} ep_rank_run;

static void *ep_rank_main(void *arg)
{
    ep_rank_run *run = arg;
    gpt_model m;
    memset(&m, 0, sizeof m);
    m.cfg = (gpt_config){.num_layers = 1, .hidden = 8, .heads = 1, .seq_len = N, .vocab = 2, .num_experts = E,
                         .moe_topk = K, .moe_capacity_factor = run->capacity_factor};
    m.B = 1;
    m.T = N;
    m.shard.ep = 2;
    m.shard.ep_rank = run->ep.rank;
    m.shard.ep_alltoall_int = threads_alltoall_int;
    m.shard.ep_ctx = &run->ep;
    gpt_moe_route *r = gpt_moe_route_alloc(&m);
    gpt_moe_route_tokens(&m, run->ep.rank ? &LOGITS1[0][0] : &LOGITS[0][0], r);
    run->rows = gpt_moe_ep_plan(&m, r);
    memcpy(run->xoffset, r->xoffset, sizeof run->xoffset);
    run->balance = r->balance;
    gpt_moe_route_free(r);
    return NULL;
}

static void two_ranks(double capacity_factor, ep_rank_run run[2])
{
    pthread_barrier_t meet;
    const int *posted[2];
    pthread_barrier_init(&meet, NULL, 2);
    pthread_t th[2];
    for (int q = 0; q < 2; q++) {
        run[q] = (ep_rank_run){.ep = {&meet, posted, q}, .capacity_factor = capacity_factor};
        assert_int_equal(pthread_create(&th[q], NULL, ep_rank_main, &run[q]), 0);
    }
    for (int q = 0; q < 2; q++)
        pthread_join(th[q], NULL);
    pthread_barrier_destroy(&meet);
}

static void ep_balance_of_known_routings(void **state)
{
    (void)state;
    ep_rank_run run[2];
    /* dropless: rank 0 routes {6, 4, 2, 2} to experts 0-3 (top_k_and_weights), rank 1 {0, 0, 7, 7}.
     * EP rank 0 (experts 0, 1) receives 6 + 4 from rank 0, none from rank 1: 10 rows, expert 0's
     * 6 first; EP rank 1 (experts 2, 3) 2 + 2 + 7 + 7 = 18, expert 2's 2 + 7 first. Busiest over
     * the mean: 18 / ((10 + 18) / 2) = 9 / 7, on both ranks. */
    two_ranks(0, run);
    assert_int_equal(run[0].rows, 10);
    assert_int_equal(run[1].rows, 18);
    static const int x0[3] = {0, 6, 10}, x1[3] = {0, 9, 18};
    assert_memory_equal(run[0].xoffset, x0, sizeof x0);
    assert_memory_equal(run[1].xoffset, x1, sizeof x1);
    for (int q = 0; q < 2; q++)
        assert_true(fabs(run[q].balance - 9.0 / 7.0) < 1e-12);
    /* capacity 4 an expert (capacity_drops_the_lowest_weights): rank 0 keeps {4, 4, 2, 2}, rank 1
     * {0, 0, 4, 4}; EP rank 0 runs 8 rows, EP rank 1 4 + 8 = 12: 12 / 10 = 1.2 */
    two_ranks(1.0, run);
    assert_int_equal(run[0].rows, 8);
    assert_int_equal(run[1].rows, 12);
    for (int q = 0; q < 2; q++)
        assert_true(fabs(run[q].balance - 1.2) < 1e-12);
    /* the balance alone: no rows at all is balanced; one rank with every row is ep times the mean */
    static const int none[8] = {0}, all_on_1[8] = {0, 0, 3, 1, 0, 0, 2, 2};
    assert_true(gpt_moe_ep_balance(none, 2, 4) == 1.0);
    assert_true(fabs(gpt_moe_ep_balance(all_on_1, 2, 4) - 2.0) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(top_k_and_weights),
        cmocka_unit_test(capacity_drops_the_lowest_weights),
        cmocka_unit_test(ep_balance_of_known_routings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
