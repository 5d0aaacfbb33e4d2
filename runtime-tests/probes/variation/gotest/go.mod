module reprorun.test/gotestprobe

go 1.16
