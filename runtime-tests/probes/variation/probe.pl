# Perl probe: hash order, rand, pid, clock, readdir.
my %h = map { $_ => 1 } qw(alpha beta gamma delta epsilon zeta eta theta);
print "pl.keys: ", join(",", keys %h), "\n";
print "pl.rand: ", rand(), "\n";
print "pl.pid: $$\n";
print "pl.time: ", time, " ", scalar(localtime), "\n";
opendir(my $d, "input") or die "input: $!";
print "pl.readdir: ", join(",", readdir($d)), "\n";
closedir($d);
