package redislease

import (
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTopologyURLOptions: a Sentinel URL's user information is the
// master's, its database and go-redis options reach the FailoverClient,
// and both topologies' clients follow context deadlines
// (ContextTimeoutEnabled), as Open's single-server client does.
func TestTopologyURLOptions(t *testing.T) {
	t.Parallel()
	u, err := url.Parse("rediss+sentinel://app:pw@h1:26379,h2:26380/3?master_name=m&sentinel_username=s&sentinel_password=spw&dial_timeout=2s&read_timeout=3s&pool_size=7&client_name=x&skip_verify=true")
	if err != nil {
		t.Fatal(err)
	}
	c, opts, err := topologyClient(u, "rediss", "sentinel")
	prefix := prefixOf(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("a Sentinel URL's client is %T, want go-redis's failover *redis.Client", c)
	}
	o := fc.Options()
	if o.Username != "app" || o.Password != "pw" || o.DB != 3 || o.DialTimeout != 2*time.Second || o.ReadTimeout != 3*time.Second ||
		o.PoolSize != 7 || o.ClientName != "x" || o.TLSConfig == nil || !o.TLSConfig.InsecureSkipVerify || !o.ContextTimeoutEnabled || prefix != nil {
		t.Errorf("failover client options: %+v, prefix %v", o, prefix)
	}

	if u, err = url.Parse("redis+cluster://app:pw@h1,h2:7001,h3:7002?prefix=p:&max_retries=5"); err != nil {
		t.Fatal(err)
	}
	c, opts, err = topologyClient(u, "redis", "cluster")
	prefix = prefixOf(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("a Cluster URL's client is %T, want *redis.ClusterClient", c)
	}
	co := cc.Options()
	if len(co.Addrs) != 3 || co.Addrs[0] != "h1:6379" || co.Addrs[2] != "h3:7002" || co.Username != "app" || co.Password != "pw" ||
		co.MaxRetries != 5 || co.TLSConfig != nil || !co.ContextTimeoutEnabled || prefix == nil || *prefix != "p:" {
		t.Errorf("cluster client options: %+v, prefix %v", co, prefix)
	}
}

// prefixOf is the prefix that opts, a URL's Options, set, or nil.
func prefixOf(t *testing.T, opts []Option) *string {
	t.Helper()
	o := options{prefix: DefaultPrefix}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.prefix == DefaultPrefix {
		return nil
	}
	return &o.prefix
}
