/* The cluster as a SimGrid 3.32 routing zone: one host per GPU, routes computed in O(1).
 *
 * SimGrid builds custom platforms only in C++, and its zones leave through one gateway each,
 * so "GPU i of every node on leaf i of its rail" cannot be a zone per node. This zone holds
 * every GPU itself and routes:
 *   same node:   nv_<src>_UP, nv_<dst>_DOWN                      (NVLink into the NVSwitch)
 *   same rail:   nic_<src>_UP, [ls_r<r>_l<a>_s<k>_UP, ls_r<r>_l<b>_s<k>_DOWN,] nic_<dst>_DOWN
 *                (leaf-spine only between leaves; spine k chosen d-mod-k by destination node)
 *   other rail:  NVLink to the GPU of the destination's rail in the source node, then that rail
 *                (PXN, as NCCL does on rail-optimized clusters)
 * fat_tree: a node's NICs share its leaf (no rails); single_switch: one switch, no spines.
 * A leaf has ceil(leaf_radix x ports_per_node / oversubscription) uplinks, one per spine.
 * tiers 3: pods of leaf_radix leaves; between pods, spine k climbs to core c (d-mod-k) over
 * sc_r<r>_p<pod>_s<k>_c<c> links (non-blocking above the leaves).
 * Latency: each link carries its own and that of the switches at its ends (half a switch at a NIC
 * link, a whole one at a leaf-spine or spine-core link), so a route's latency is the sum of its
 * links'; none is reported to SimGrid (get_local_route says why).
 * adaptive=1 (InfiniBand adaptive routing: the switch sends each packet out of its least-loaded
 * uplink): a leaf's uplinks are one link of their summed bandwidth (ls_r<r>_l<a>_s0), a pod's core
 * links likewise (sc_r<r>_p<pod>_s0_c0), so flows share the bundle and never collide on one link.
 *
 * ZeRO-Offload (offload=1): each node also has a CPU host n<n>cpu, its DRAM n<n>mem and its NVMe
 * n<n>nvme (created after every GPU). GPU <-> CPU: pcie_<gpu> (split duplex, one per GPU);
 * CPU <-> DRAM: hostmem_n<n> (one shared link: the CPU optimizer step's memory traffic);
 * NVMe -> CPU: nvmer_n<n>, CPU -> NVMe: nvmew_n<n> (shared links at the node's read and write
 * bandwidths); NVMe <-> GPU: the NVMe link then the GPU's PCIe link. No latency on these.
 *
 * Loaded from C with simgrid_load_platform("libdtsim_railzone.so"); the C side passes the
 * cluster in the environment variable DTSIM_RAILZONE as "key=value;..." (see flow_platform.c). */
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;
using simgrid::kernel::resource::StandardLinkImpl;
using simgrid::kernel::routing::NetPoint;
using simgrid::kernel::routing::Route;

namespace {

struct Params {
    int nodes = 1, gpus = 8, topology = 0, leaf_radix = 32, tiers = 2, adaptive = 0;
    double nvlink_Bps = 450e9, nvlink_lat = 0.7e-6, nic_Bps = 50e9, link_lat = 0.6e-6, switch_lat = 0.3e-6;
    double oversubscription = 1.0;
    int offload = 0;
    double pcie_Bps = 32e9, hostmem_Bps = 0, nvme_read_Bps = 0, nvme_write_Bps = 0;
};

Params parse_params()
{
    Params p;
    const char *env = std::getenv("DTSIM_RAILZONE");
    if (!env) {
        std::fprintf(stderr, "dtsim railzone: DTSIM_RAILZONE is not set\n");
        std::abort();
    }
    std::map<std::string, double> kv;
    std::string s(env);
    size_t pos = 0;
    while (pos < s.size()) {
        size_t end = s.find(';', pos);
        if (end == std::string::npos)
            end = s.size();
        std::string item = s.substr(pos, end - pos);
        size_t eq = item.find('=');
        if (eq != std::string::npos)
            kv[item.substr(0, eq)] = std::atof(item.c_str() + eq + 1);
        pos = end + 1;
    }
    p.nodes = (int)kv["nodes"];
    p.gpus = (int)kv["gpus"];
    p.topology = (int)kv["topology"];
    p.leaf_radix = (int)kv["leaf_radix"];
    p.tiers = (int)kv["tiers"];
    p.nvlink_Bps = kv["nvlink_Bps"];
    p.nvlink_lat = kv["nvlink_lat"];
    p.nic_Bps = kv["nic_Bps"];
    p.link_lat = kv["link_lat"];
    p.switch_lat = kv["switch_lat"];
    p.oversubscription = kv["oversubscription"] >= 1 ? kv["oversubscription"] : 1;
    if (p.leaf_radix < 1)
        p.leaf_radix = 1;
    p.offload = (int)kv["offload"];
    p.adaptive = (int)kv["adaptive"];
    p.pcie_Bps = kv["pcie_Bps"];
    p.hostmem_Bps = kv["hostmem_Bps"];
    p.nvme_read_Bps = kv["nvme_read_Bps"];
    p.nvme_write_Bps = kv["nvme_write_Bps"];
    return p;
}

/* A link as routes take it: its kernel object, looked up once when the link is made (s4u's
 * Link::get_impl() is a dynamic_cast, which on every route cost a tenth of a large replay's
 * time). The s4u link stays the one faults change: same kernel object. */
struct Hop {
    StandardLinkImpl *impl = nullptr;
};
struct Duplex {
    Hop up, down;
};

class RailZone : public simgrid::kernel::routing::NetZoneImpl {
public:
    Params p;
    unsigned long first_id = 0;
    int rails = 1, leaves = 1, spines = 1, pods = 1;
    int bundle = 1; /* uplinks one link stands for: adaptive routing's bundle, else 1 */
    std::vector<Duplex> nv, nic, ls;         /* per GPU, per GPU, per (rail, leaf, spine) */
    std::vector<Duplex> sc;                  /* per (rail, pod, spine, core): the third tier */
    std::vector<Duplex> pcie;                /* offload: per GPU */
    std::vector<Hop> hostmem, nvmer, nvmew;  /* offload: per node */

    explicit RailZone(const Params &params) : NetZoneImpl("dtsim-cluster"), p(params)
    {
        rails = p.topology == 0 ? p.gpus : 1;       /* rail-optimized: one fabric per GPU index */
        leaves = (p.nodes + p.leaf_radix - 1) / p.leaf_radix;
        int ports_per_node = p.topology == 0 ? 1 : p.gpus;
        spines = std::max(1, (int)std::ceil(p.leaf_radix * ports_per_node / p.oversubscription));
        if (p.topology == 2 || leaves == 1)
            spines = 0;
        /* Three tiers: a pod is leaf_radix leaves under its own spines; pods meet at the cores. */
        if (p.tiers >= 3 && spines > 0 && leaves > p.leaf_radix)
            pods = (leaves + p.leaf_radix - 1) / p.leaf_radix;
        if (p.adaptive && spines > 0) { /* one link for the leaf's spines uplinks */
            bundle = spines;
            spines = 1;
        }
    }

    static void add(std::vector<StandardLinkImpl *> &l, const Hop &k) { l.push_back(k.impl); }

    void rail_route(unsigned a, unsigned b, Route *r)
    {
        unsigned na = a / p.gpus, nb = b / p.gpus;
        add(r->link_list_, nic[a].up);
        unsigned la = na / p.leaf_radix, lb = nb / p.leaf_radix;
        if (spines > 0 && la != lb) {
            unsigned rail = rails > 1 ? a % p.gpus : 0;
            unsigned k = (b / (rails > 1 ? p.gpus : 1)) % spines; /* d-mod-k by destination port */
            add(r->link_list_, ls[(rail * leaves + la) * spines + k].up);
            unsigned pa = la / p.leaf_radix, pb = lb / p.leaf_radix;
            if (pods > 1 && pa != pb) {
                unsigned c = (b / (rails > 1 ? p.gpus : 1) / spines) % spines; /* core, d-mod-k again */
                add(r->link_list_, sc[((rail * pods + pa) * spines + k) * spines + c].up);
                add(r->link_list_, sc[((rail * pods + pb) * spines + k) * spines + c].down);
            }
            add(r->link_list_, ls[(rail * leaves + lb) * spines + k].down);
        }
        add(r->link_list_, nic[b].down);
    }

    /* Offload endpoints: index >= GPUs; kind 0 cpu, 1 mem, 2 nvme; node n. */
    void offload_route(unsigned a, unsigned b, Route *r)
    {
        unsigned G = (unsigned)(p.nodes * p.gpus), N = (unsigned)p.nodes;
        int ka = a < G ? -1 : (int)((a - G) / N), kb = b < G ? -1 : (int)((b - G) / N);
        unsigned na = a < G ? a / p.gpus : (a - G) % N, nb = b < G ? b / p.gpus : (b - G) % N;
        if (na != nb)
            return; /* host transfers stay inside a node */
        if (ka < 0) { /* GPU -> cpu, or -> nvme through the cpu */
            add(r->link_list_, pcie[a].up);
            if (kb == 2)
                add(r->link_list_, nvmew[nb]);
        } else if (kb < 0) { /* cpu -> GPU, or nvme -> GPU */
            if (ka == 2)
                add(r->link_list_, nvmer[na]);
            add(r->link_list_, pcie[b].down);
        } else if (ka == 2 || kb == 2) {
            add(r->link_list_, ka == 2 ? nvmer[na] : nvmew[na]);
        } else {
            add(r->link_list_, hostmem[na]);
        }
    }

    /* No latency goes to SimGrid (lat stays as it is): CM02 shares a link between flows in
     * inverse proportion to their routes' latency (network_cm02.cpp: the sharing penalty is the
     * latency, TCP's round-trip unfairness), where InfiniBand's credit-based switches and NVLink
     * share it alike whatever the path's length. Every flow thus has the same penalty, and the flow
     * replay charges a route's latency itself: the sum of its links' latencies (each fabric link
     * carries the switch latency of its ends, half a switch at a NIC). */
    void get_local_route(const NetPoint *src, const NetPoint *dst, Route *r, double *lat) override
    {
        (void)lat;
        unsigned a = (unsigned)(src->id() - first_id), b = (unsigned)(dst->id() - first_id);
        if (a == b)
            return;
        unsigned G = (unsigned)(p.nodes * p.gpus);
        if (a >= G || b >= G) {
            offload_route(a, b, r);
            return;
        }
        if (a / p.gpus == b / p.gpus) {
            add(r->link_list_, nv[a].up);
            add(r->link_list_, nv[b].down);
        } else if (rails == 1 || a % p.gpus == b % p.gpus) {
            rail_route(a, b, r);
        } else {
            unsigned relay = (a / p.gpus) * p.gpus + b % p.gpus; /* PXN */
            add(r->link_list_, nv[a].up);
            add(r->link_list_, nv[relay].down);
            rail_route(relay, b, r);
        }
    }
};

Hop hop(sg4::Link *l)
{
    Hop h;
    h.impl = l->get_impl();
    return h;
}

Duplex link(RailZone *z, const std::string &name, double bw, double lat)
{
    auto *l = z->create_split_duplex_link(name, {bw});
    l->set_latency(lat);
    l->seal();
    Duplex d;
    d.up = hop(l->get_link_up());
    d.down = hop(l->get_link_down());
    return d;
}

} // namespace

extern "C" void load_platform(const sg4::Engine &)
{
    Params p = parse_params();
    auto *z = new RailZone(p); /* created first and without a parent: it is the root */
    char name[96];
    for (int n = 0; n < p.nodes; n++)
        for (int g = 0; g < p.gpus; g++) {
            std::snprintf(name, sizeof name, "n%dg%d", n, g);
            auto *h = z->create_host(name, {1e12});
            h->seal();
            if (n == 0 && g == 0)
                z->first_id = h->get_netpoint()->id();
            z->nv.push_back(link(z, std::string("nv_") + name, p.nvlink_Bps, p.nvlink_lat));
            z->nic.push_back(link(z, std::string("nic_") + name, p.nic_Bps, p.link_lat + p.switch_lat / 2));
        }
    for (int r = 0; r < z->rails; r++)
        for (int l = 0; l < z->leaves; l++)
            for (int k = 0; k < z->spines; k++) {
                std::snprintf(name, sizeof name, "ls_r%d_l%d_s%d", r, l, k);
                z->ls.push_back(link(z, name, p.nic_Bps * z->bundle, p.link_lat + p.switch_lat));
            }
    for (int r = 0; r < z->rails; r++)
        for (int pd = 0; pd < (z->pods > 1 ? z->pods : 0); pd++)
            for (int k = 0; k < z->spines; k++)
                for (int c = 0; c < z->spines; c++) {
                    std::snprintf(name, sizeof name, "sc_r%d_p%d_s%d_c%d", r, pd, k, c);
                    z->sc.push_back(link(z, name, p.nic_Bps * z->bundle * z->bundle, p.link_lat + p.switch_lat));
                }
    if (p.offload) {
        for (int n = 0; n < p.nodes; n++)
            for (int g = 0; g < p.gpus; g++) {
                std::snprintf(name, sizeof name, "pcie_n%dg%d", n, g);
                z->pcie.push_back(link(z, name, p.pcie_Bps, 0));
            }
        const char *kinds[3] = {"cpu", "mem", "nvme"};
        for (int k = 0; k < 3; k++) /* after every GPU, so that GPU ids stay 0..G-1 */
            for (int n = 0; n < p.nodes; n++) {
                std::snprintf(name, sizeof name, "n%d%s", n, kinds[k]);
                z->create_host(name, {1e12})->seal();
            }
        for (int n = 0; n < p.nodes; n++) {
            std::snprintf(name, sizeof name, "hostmem_n%d", n);
            z->hostmem.push_back(hop(z->create_link(name, {p.hostmem_Bps > 0 ? p.hostmem_Bps : 1e15})->seal()));
            std::snprintf(name, sizeof name, "nvmer_n%d", n);
            z->nvmer.push_back(hop(z->create_link(name, {p.nvme_read_Bps > 0 ? p.nvme_read_Bps : 1e15})->seal()));
            std::snprintf(name, sizeof name, "nvmew_n%d", n);
            z->nvmew.push_back(hop(z->create_link(name, {p.nvme_write_Bps > 0 ? p.nvme_write_Bps : 1e15})->seal()));
        }
    }
    z->seal();
}
