/** Entry: three consoles behind hash routes (#/consumer, #/staff); nothing of a session outlives the page. */
import '@picocss/pico/css/pico.min.css';
import './styles.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ConsumerConsole } from './consumer/Consumer.js';
import { StaffConsole } from './staff/Staff.js';

function App() {
  const [route, setRoute] = useState(location.hash);
  useEffect(() => {
    const on = () => setRoute(location.hash);
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  if (route.startsWith('#/consumer')) return <ConsumerConsole />;
  if (route.startsWith('#/staff')) return <StaffConsole />;
  return (
    <main class="container narrow landing">
      <h1>faceid</h1>
      <p>Face-backed identity verification.</p>
      <nav class="menu" aria-label="Consoles">
        <a role="button" href="#/consumer">
          I am a customer
        </a>
        <a role="button" class="secondary" href="#/staff">
          Staff: operators and administrators
        </a>
      </nav>
    </main>
  );
}

render(<App />, document.getElementById('app')!);
