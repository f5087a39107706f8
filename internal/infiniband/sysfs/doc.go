// Package sysfs discovers the RDMA devices a host has from sysfs
// (/sys/class/infiniband and /sys/class/net, or a tree at another root):
// devices, their ports, GID and P_Key tables, the netdevs on each port
// and their MTUs, and which port and GID an interface or IP address is
// bound to. It speaks package infiniband's vocabulary; ipoib exports it
// under public names.
//
// # Files
//
//	device.go    Device, Port, Netdev: what discovery returns
//	discover.go  Discover, System's lookups, the cross references
//	binding.go   InterfaceFor, PortForIP: which port and GID to use
//	readdev.go   reading devices, ports and GID tables; LookupGID
//	netdev.go    reading /sys/class/net; LookupNetdev
//	netns.go     keeping the netdevs of this network namespace
//	sysfsfile.go small sysfs file and directory readers
//
// Errors begin "ipoib:", the name of the package users call. The tests of
// discovery are ipoib's, through its exported names, against the fake
// sysfs trees in ipoib/testdata and, in the rxe VM, the live one;
// netns_test.go here tests the namespace filter.
package sysfs
