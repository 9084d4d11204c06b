package integration

// netRecord is the record's `network` object (docs/supervision.md).
type netRecord struct {
	Mode          string   `json:"mode"`
	Allow         []string `json:"allow"`
	Broker        string   `json:"broker"`
	UpstreamProxy *string  `json:"upstream_proxy"`
	APIRoutes     []struct {
		Name        string   `json:"name"`
		Upstream    string   `json:"upstream"`
		Credentials []string `json:"credentials"`
	} `json:"api_routes"`
	Connections        []netConn `json:"connections"`
	ConnectionsDropped int       `json:"connections_dropped"`
	Totals             struct {
		Connections int   `json:"connections"`
		Allowed     int   `json:"allowed"`
		Refused     int   `json:"refused"`
		BytesUp     int64 `json:"bytes_up"`
		BytesDown   int64 `json:"bytes_down"`
	} `json:"totals"`
	RefusedHosts []string `json:"refused_hosts"`
	LimitsHit    []string `json:"limits_hit"`
}

type netConn struct {
	Proto      string `json:"proto"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Addr       string `json:"addr"`
	Via        string `json:"via"`
	Allowed    bool   `json:"allowed"`
	Rule       string `json:"rule"`
	Status     int    `json:"status"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
	Start      string `json:"start"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error"`
}
