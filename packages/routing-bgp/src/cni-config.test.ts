import { KUBE_ROUTER_CNI_CONFLIST } from '@kube-router/testkit';
import { describe, expect, it } from 'vitest';
import { editCniConfig } from './cni-config.js';

const CONFLIST = '/etc/cni/net.d/10-kuberouter.conflist';
const CONF = '/etc/cni/net.d/10-kuberouter.conf';
const text = (value: unknown) => JSON.stringify(value);
const bridgeOf = (edited: { text: string }) => (JSON.parse(edited.text) as { plugins: Record<string, any>[] }).plugins[0]!; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('editCniConfig', () => {
  it("adds each pod CIDR as a range set of the bridge's host-local ipam and keeps every other key (the kubeadm ConfigMap)", () => {
    const edited = editCniConfig(text(KUBE_ROUTER_CNI_CONFLIST), CONFLIST, { podCidrs: ['10.244.3.0/24', 'fd00:10:244:3::/64'], mtu: 1450 });
    expect(edited.changed).toBe(true);
    const [bridge] = KUBE_ROUTER_CNI_CONFLIST.plugins;
    expect(JSON.parse(edited.text)).toEqual({
      ...KUBE_ROUTER_CNI_CONFLIST,
      plugins: [{ ...bridge, ipam: { type: 'host-local', ranges: [[{ subnet: '10.244.3.0/24' }], [{ subnet: 'fd00:10:244:3::/64' }]] }, mtu: 1450 }],
    });
    expect(edited.ranges).toEqual(['10.244.3.0/24', 'fd00:10:244:3::/64']);
  });

  it('changes nothing, and returns the same text, when the file already says it', () => {
    const once = editCniConfig(text(KUBE_ROUTER_CNI_CONFLIST), CONFLIST, { podCidrs: ['10.244.3.0/24'], mtu: 1450 });
    const twice = editCniConfig(once.text, CONFLIST, { podCidrs: ['10.244.3.0/24'], mtu: 1450 });
    expect(twice).toEqual({ text: once.text, changed: false, ranges: ['10.244.3.0/24'] });
    // Formatting alone is no change: a file kube-router wrote compactly is not rewritten.
    expect(editCniConfig(text(JSON.parse(once.text)), CONFLIST, { podCidrs: ['10.244.3.0/24'], mtu: 1450 }).changed).toBe(false);
  });

  it('finds an existing range by its network (10.244.3.7/24 is 10.244.3.0/24) and never removes one', () => {
    const config = { ...KUBE_ROUTER_CNI_CONFLIST, plugins: [{ type: 'bridge', ipam: { type: 'host-local', ranges: [[{ subnet: '10.244.3.7/24', gateway: '10.244.3.1' }], [{ subnet: '192.0.2.0/24' }]] } }] };
    const edited = editCniConfig(text(config), CONFLIST, { podCidrs: ['10.244.3.0/24'] });
    expect(edited.changed).toBe(false);
    expect(edited.ranges).toEqual(['10.244.3.0/24', '192.0.2.0/24']);
  });

  it('folds a legacy ipam.subnet into ranges as the CNI IPAM loader does, in a plain .conf', () => {
    const conf = { cniVersion: '0.3.0', name: 'mynet', type: 'bridge', bridge: 'kube-bridge', ipam: { type: 'host-local', subnet: '10.244.3.0/24', dataDir: '/x' } };
    const edited = JSON.parse(editCniConfig(text(conf), CONF, { podCidrs: ['10.244.3.0/24', 'fd00:3::/64'] }).text);
    expect(edited.ipam).toEqual({ type: 'host-local', dataDir: '/x', ranges: [[{ subnet: '10.244.3.0/24' }], [{ subnet: 'fd00:3::/64' }]] });
    expect(edited).not.toHaveProperty('mtu');
  });

  it('edits the first bridge plugin of a list that has others (the hostport DaemonSet adds portmap)', () => {
    const config = { ...KUBE_ROUTER_CNI_CONFLIST, plugins: [{ type: 'portmap', capabilities: { portMappings: true } }, ...KUBE_ROUTER_CNI_CONFLIST.plugins] };
    const edited = JSON.parse(editCniConfig(text(config), CONFLIST, { podCidrs: ['10.244.3.0/24'], mtu: 9000 }).text);
    expect(edited.plugins[0]).toEqual({ type: 'portmap', capabilities: { portMappings: true } });
    expect(edited.plugins[1].ipam.ranges).toEqual([[{ subnet: '10.244.3.0/24' }]]);
    expect(edited.plugins[1].mtu).toBe(9000);
  });

  it('leaves the MTU alone without --auto-mtu, and sets it again when it differs', () => {
    const config = { ...KUBE_ROUTER_CNI_CONFLIST, plugins: [{ ...KUBE_ROUTER_CNI_CONFLIST.plugins[0], mtu: 1400 }] };
    expect(bridgeOf(editCniConfig(text(config), CONFLIST, { podCidrs: [] })).mtu).toBe(1400);
    expect(bridgeOf(editCniConfig(text(config), CONFLIST, { podCidrs: [], mtu: 1500 })).mtu).toBe(1500);
  });

  it('adds IPv4 before IPv6 whatever the order given, as kube-router does: host-local assigns in range order', () => {
    const edited = editCniConfig(text(KUBE_ROUTER_CNI_CONFLIST), CONFLIST, { podCidrs: ['fd00:3::/64', '10.244.3.0/24'] });
    expect(bridgeOf(edited).ipam.ranges).toEqual([[{ subnet: '10.244.3.0/24' }], [{ subnet: 'fd00:3::/64' }]]);
  });

  it('reads JSON as Go does: ranges null is none, an empty subnet stays as it is, a subnet that is no string is refused', () => {
    const config = (ipam: Record<string, unknown>) => text({ ...KUBE_ROUTER_CNI_CONFLIST, plugins: [{ type: 'bridge', ipam: { type: 'host-local', ...ipam } }] });
    expect(bridgeOf(editCniConfig(config({ ranges: null }), CONFLIST, { podCidrs: ['10.244.3.0/24'] })).ipam.ranges).toEqual([[{ subnet: '10.244.3.0/24' }]]);
    expect(bridgeOf(editCniConfig(config({ subnet: '' }), CONFLIST, { podCidrs: ['10.244.3.0/24'] })).ipam).toHaveProperty('subnet', '');
    expect(() => editCniConfig(config({ subnet: 24 }), CONFLIST, { podCidrs: [] })).toThrow('ipam.subnet 24 is not a string');
  });

  it.each([
    ['not JSON', '{"plugins": [', CONFLIST, 'is not JSON'],
    ['a list without plugins', text({ name: 'x', plugins: [] }), CONFLIST, 'the configuration list has no plugins'],
    ['a list without a bridge', text({ name: 'x', plugins: [{ type: 'ptp', ipam: {} }] }), CONFLIST, 'the configuration list has no bridge plugin'],
    ['a conf without a type', text({ name: 'x', ipam: {} }), CONF, 'the configuration has no type'],
    ['a bridge without ipam', text({ name: 'x', plugins: [{ type: 'bridge' }] }), CONFLIST, 'the bridge plugin has no ipam section'],
    ['a range that is not a CIDR', text({ name: 'x', plugins: [{ type: 'bridge', ipam: { ranges: [[{ subnet: '010.0.0.0/8' }]] } }] }), CONFLIST, 'ipam range subnet "010.0.0.0/8" is not a CIDR'],
    ['a legacy subnet that is not a CIDR', text({ name: 'x', type: 'bridge', ipam: { subnet: '10.0.0.0' } }), CONF, 'ipam.subnet "10.0.0.0" is not a CIDR'],
  ])('refuses %s, naming the file and the problem', (_what, content, path, message) => {
    expect(() => editCniConfig(content, path, { podCidrs: ['10.244.3.0/24'] })).toThrow(`${path}`);
    expect(() => editCniConfig(content, path, { podCidrs: ['10.244.3.0/24'] })).toThrow(message);
  });
});
