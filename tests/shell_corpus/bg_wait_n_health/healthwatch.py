import time

while True:
    time.sleep(30)
